/*
 * steer-probe: the command line around probe/agent.h. It reads the steerd configuration
 * (conf_load_file(): the same file, the same checks), runs the agent on one libev loop in the
 * foreground and stops on SIGTERM or SIGINT.
 */
#include <ev.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/err.h"
#include "base/log.h"
#include "conf/conf.h"
#include "probe/agent.h"

#ifndef STEER_VERSION
#define STEER_VERSION "unknown"
#endif

typedef struct {
	const char *config;
	const char *datacenter;
	const char *listen;
	bool check;
	bool have_level;
	log_level_t level;
} cli_t;

enum { OPT_CHECK = 256, OPT_LISTEN, OPT_FOREGROUND, OPT_LOG_LEVEL };

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: steer-probe -c FILE -d DATACENTER [options]\n"
	    "\n"
	    "Steer's path-measurement agent: probes the client prefixes the DNS nodes ask\n"
	    "for from this datacenter and serves the measured table to the nodes.\n"
	    "\n"
	    "  -c, --config FILE        the steer.yaml the nodes read (its paths: section)\n"
	    "  -d, --datacenter NAME    the datacenter this agent measures from (an entry of\n"
	    "                           paths.agents)\n"
	    "      --listen ADDR:PORT   serve /paths/table there instead of the address of\n"
	    "                           the agent's url (IPv6 as [::1]:8054)\n"
	    "      --check-config       check the configuration for this agent and exit\n"
	    "      --foreground         accepted for init scripts: steer-probe always runs\n"
	    "                           in the foreground\n"
	    "      --log-level L        error, warning, notice, info or debug\n"
	    "  -V, --version            print the version\n"
	    "  -h, --help               this help\n"
	    "\n"
	    "SIGTERM or SIGINT stops the agent; restart it to apply a changed configuration.\n");
}

/* Returns 0 to go on, 1 to exit 0, -1 for a usage error. */
static int parse_option(int opt, const char *arg, cli_t *cli)
{
	switch (opt) {
	case 'c':
		cli->config = arg;
		return 0;
	case 'd':
		cli->datacenter = arg;
		return 0;
	case OPT_LISTEN:
		cli->listen = arg;
		return 0;
	case OPT_CHECK:
		cli->check = true;
		return 0;
	case OPT_FOREGROUND:
		return 0;
	case OPT_LOG_LEVEL:
		if (log_level_parse(arg, &cli->level) != 0) {
			fprintf(stderr, "steer-probe: --log-level: unknown level '%s'\n", arg);
			return -1;
		}
		cli->have_level = true;
		return 0;
	case 'V':
		printf("steer-probe %s\n", STEER_VERSION);
		return 1;
	case 'h':
		usage(stdout);
		return 1;
	default:
		usage(stderr);
		return -1;
	}
}

static int parse_args(int argc, char **argv, cli_t *cli)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"datacenter", required_argument, NULL, 'd'},
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"check-config", no_argument, NULL, OPT_CHECK},
	    {"foreground", no_argument, NULL, OPT_FOREGROUND},
	    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;
	while ((opt = getopt_long(argc, argv, "c:d:Vh", longopts, NULL)) != -1) {
		int ret = parse_option(opt, optarg, cli);
		if (ret != 0)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "steer-probe: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (cli->config == NULL || cli->datacenter == NULL) {
		fprintf(stderr, "steer-probe: --config FILE and --datacenter NAME are required\n");
		return -1;
	}
	return 0;
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	log_notice("probe: signal %d: stopping", w->signum);
	ev_break(loop, EVBREAK_ALL);
}

/* A dns or tcp sample holds a socket until its reply or its timeout, so rate x timeout of
 * them may be open at once (2,000 at 2,000 probes/s and 1 s): lift the soft limit to the hard
 * one, which is what the service manager or the shell allows. */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* No reload: the table lives in memory only and a restart rebuilds it within one demand
 * round, so SIGHUP (an operator's habit) says so instead of ending the process. */
static void on_hangup(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	log_notice("probe: SIGHUP: steer-probe does not reload; restart it to apply a changed "
	           "configuration");
}

static int run(const cli_t *cli, const conf_t *conf)
{
	probe_agent_opts_t opts = {
	    .conf = conf, .datacenter = cli->datacenter, .listen = cli->listen};
	char err[1024] = "";
	if (cli->check) {
		if (probe_agent_check(&opts, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s\nsteer-probe: configuration has errors\n", err);
			return 1;
		}
		printf("steer-probe: configuration for datacenter %s is valid\n", cli->datacenter);
		return 0;
	}
	raise_nofile();
	struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
	signal(SIGPIPE, SIG_IGN);
	probe_agent_t *agent = NULL;
	if (probe_agent_start(loop, &opts, &agent, err, sizeof(err)) != 0) {
		log_err("probe: %s", err);
		return 1;
	}
	ev_signal term, intr, hup;
	ev_signal_init(&term, on_signal, SIGTERM);
	ev_signal_init(&intr, on_signal, SIGINT);
	ev_signal_init(&hup, on_hangup, SIGHUP);
	ev_signal_start(loop, &term);
	ev_signal_start(loop, &intr);
	ev_signal_start(loop, &hup);
	ev_run(loop, 0);
	probe_agent_stop(agent);
	ev_signal_stop(loop, &term);
	ev_signal_stop(loop, &intr);
	ev_signal_stop(loop, &hup);
	ev_loop_destroy(loop);
	return 0;
}

int main(int argc, char **argv)
{
	cli_t cli = {0};
	int ret = parse_args(argc, argv, &cli);
	if (ret != 0)
		return ret > 0 ? 0 : 2;
	log_set_ident("steer-probe");
	log_setup(LOG_TARGET_STDERR, cli.have_level ? cli.level : LOG_LEVEL_NOTICE);
	conf_t *conf = NULL;
	char err[1024] = "";
	if (conf_load_file(cli.config, &conf, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\nsteer-probe: configuration has errors\n", err);
		return 1;
	}
	if (!cli.have_level)
		log_setup(conf->log_target, conf->log_level);
	ret = run(&cli, conf);
	conf_free(conf);
	return ret;
}
