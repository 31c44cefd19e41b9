/*
 * steerd: command line, then hands over to server.c. The main thread becomes the control
 * thread.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/check.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/server.h"

#ifndef STEER_VERSION
#define STEER_VERSION "unknown"
#endif

/* Upper bounds of the thread counts, as in the configuration schema (server.workers and
 * server.tcp-workers). */
#define WORKERS_MAX     256
#define TCP_WORKERS_MAX 64

enum { EXIT_USAGE = 2 };

enum {
	OPT_CHECK = 256,
	OPT_LISTEN,
	OPT_ZONE,
	OPT_WORKERS,
	OPT_TCP_WORKERS,
	OPT_CONTROL_SOCKET,
	OPT_LOG_LEVEL,
	OPT_REFERENCE,
	OPT_FORCE,
	OPT_FORWARD,
	OPT_ALLOW_RECURSION,
	OPT_HTTP,
};

typedef struct {
	server_opts_t opts;
	bool check;
	bool reference;
	bool reference_man; /* --config-reference=man: the steer.yaml(5) page */
} cli_t;

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: steerd -c FILE [--check-config]\n"
	    "       steerd --listen ADDR:PORT --zone NAME=FILE [--zone ...] [options]\n"
	    "       steerd --listen ADDR:PORT --forward ADDR[@SRC] [--forward ...]\n"
	    "              --allow-recursion PREFIX [...] [--zone ...] [options]\n"
	    "\n"
	    "Steer authoritative DNS server and caching forwarder.\n"
	    "\n"
	    "  -c, --config FILE        run from a YAML configuration file\n"
	    "      --check-config       load the configuration and every zone, report errors "
	    "and exit\n"
	    "      --listen ADDR:PORT   quick mode: listen address, repeatable (IPv6 as "
	    "[::1]:5353)\n"
	    "      --zone NAME=FILE     quick mode: serve zone NAME from FILE, repeatable\n"
	    "      --forward ADDR[:PORT][@SRC]\n"
	    "                           quick mode: forward cache misses to the recursive\n"
	    "                           resolver ADDR, sending from SRC; repeatable, in\n"
	    "                           preference order (IPv6 as [2001:db8::53]:53@2001:db8::1)\n"
	    "      --allow-recursion PREFIX\n"
	    "                           quick mode: clients that may recurse (10.0.0.0/24),\n"
	    "                           repeatable; others get REFUSED (default: nobody)\n"
	    "      --http ADDR:PORT     quick mode: serve the JSON API, /metrics and the status\n"
	    "                           page there (read-only: no token), repeatable\n"
	    "      --workers N          UDP worker threads (0 = one per CPU)\n"
	    "      --tcp-workers N      TCP threads (0 = one per CPU, at most 4)\n"
	    "      --control-socket P   control socket for steerctl (default: the config's\n"
	    "                           server.control-socket; quick mode: steerctl's default,\n"
	    "                           /run/steer/steerd.sock as root, else\n"
	    "                           $XDG_RUNTIME_DIR/steerd.sock)\n"
	    "      --log-level L        error, warning, notice, info or debug\n"
	    "      --force              accept nets files that shrank beyond max-shrink or\n"
	    "                           emptied since the last accepted load\n"
	    "                           (gslb.nets-state-file); also with --check-config\n"
	    "      --config-reference[=FORMAT]\n"
	    "                           print the configuration reference: markdown (the\n"
	    "                           default, docs/configuration.md) or man (steer.yaml.5)\n"
	    "  -V, --version            print the version\n"
	    "  -h, --help               this help\n"
	    "\n"
	    "SIGHUP (or 'steerctl reload') reloads the configuration and changed zone files;\n"
	    "SIGTERM or SIGINT stops the server.\n");
}

static int parse_count(const char *opt, const char *text, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) {
		fprintf(stderr, "steerd: %s: expected a number from 0 to %ld, got '%s'\n", opt, max,
		        text);
		return -1;
	}
	*out = v;
	return 0;
}

static void push(const char ***list, size_t *n, const char *item)
{
	*list = xrealloc(*list, (*n + 1) * sizeof(**list));
	(*list)[(*n)++] = item;
}

/* One option into @p cli. Returns 0, 1 when the program should exit 0, or -1 on error. */
static int parse_option(int opt, const char *arg, cli_t *cli)
{
	server_opts_t *o = &cli->opts;
	switch (opt) {
	case 'c':
		o->config_path = arg;
		return 0;
	case OPT_CHECK:
		cli->check = true;
		return 0;
	case OPT_LISTEN:
		push(&o->listen, &o->n_listen, arg);
		return 0;
	case OPT_ZONE:
		push(&o->zones, &o->n_zones, arg);
		return 0;
	case OPT_FORWARD:
		push(&o->forward, &o->n_forward, arg);
		return 0;
	case OPT_ALLOW_RECURSION:
		push(&o->allow_recursion, &o->n_allow_recursion, arg);
		return 0;
	case OPT_HTTP:
		push(&o->http, &o->n_http, arg);
		return 0;
	case OPT_WORKERS:
		return parse_count("--workers", arg, WORKERS_MAX, &o->workers);
	case OPT_TCP_WORKERS:
		return parse_count("--tcp-workers", arg, TCP_WORKERS_MAX, &o->tcp_workers);
	case OPT_CONTROL_SOCKET:
		o->control_socket = arg;
		return 0;
	case OPT_LOG_LEVEL:
		o->has_log_level = true;
		if (log_level_parse(arg, &o->log_level) == 0)
			return 0;
		fprintf(stderr, "steerd: --log-level: unknown level '%s'\n", arg);
		return -1;
	case OPT_REFERENCE:
		cli->reference = true;
		if (arg == NULL || strcmp(arg, "markdown") == 0)
			return 0;
		if (strcmp(arg, "man") == 0) {
			cli->reference_man = true;
			return 0;
		}
		fprintf(stderr,
		        "steerd: --config-reference: unknown format '%s' (markdown or man)\n", arg);
		return -1;
	case OPT_FORCE:
		o->force = true;
		return 0;
	case 'V':
		printf("steerd %s\n", STEER_VERSION);
		return 1;
	case 'h':
		usage(stdout);
		return 1;
	default:
		return -1;
	}
}

/* Returns 0 to go on, 1 to exit 0, -1 for a usage error. */
static int parse_args(int argc, char **argv, cli_t *cli)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"check-config", no_argument, NULL, OPT_CHECK},
	    {"listen", required_argument, NULL, OPT_LISTEN},
	    {"zone", required_argument, NULL, OPT_ZONE},
	    {"forward", required_argument, NULL, OPT_FORWARD},
	    {"allow-recursion", required_argument, NULL, OPT_ALLOW_RECURSION},
	    {"http", required_argument, NULL, OPT_HTTP},
	    {"workers", required_argument, NULL, OPT_WORKERS},
	    {"tcp-workers", required_argument, NULL, OPT_TCP_WORKERS},
	    {"control-socket", required_argument, NULL, OPT_CONTROL_SOCKET},
	    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	    {"config-reference", optional_argument, NULL, OPT_REFERENCE},
	    {"force", no_argument, NULL, OPT_FORCE},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	cli->opts.workers = cli->opts.tcp_workers = -1;
	int opt;
	while ((opt = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
		int ret = parse_option(opt, optarg, cli);
		if (ret != 0)
			return ret;
	}
	if (optind < argc) {
		fprintf(stderr, "steerd: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (cli->reference)
		return 0;
	const server_opts_t *o = &cli->opts;
	if (o->config_path != NULL && (o->n_listen > 0 || o->n_zones > 0 || o->n_forward > 0 ||
	                               o->n_allow_recursion > 0 || o->n_http > 0)) {
		fprintf(stderr,
		        "steerd: --listen, --zone, --forward, --allow-recursion and --http are for "
		        "running without a configuration file; put them in %s instead\n",
		        o->config_path);
		return -1;
	}
	if (o->config_path == NULL && o->n_zones == 0 && o->n_forward == 0) {
		fprintf(stderr, "steerd: nothing to serve: give -c FILE, --zone NAME=FILE or "
		                "--forward ADDR\n");
		return -1;
	}
	if (o->config_path == NULL && o->n_allow_recursion > 0 && o->n_forward == 0) {
		fprintf(stderr, "steerd: --allow-recursion needs --forward (there is nothing to "
		                "forward to)\n");
		return -1;
	}
	return 0;
}

/* --check-config: the start-up code path up to (not including) binding. */
static int check_config(const cli_t *cli)
{
	char err[SERVER_ERR_MAX] = "";
	conf_t *conf = NULL;
	zone_set_t *set = NULL;
	gslb_view_t *gslb = NULL;
	server_report_t report = {0};
	int ret = server_conf_build(&cli->opts, &conf, err, sizeof(err));
	if (ret == 0) {
		log_setup(LOG_TARGET_STDERR, conf->log_level);
		ret = server_zones_build(conf, NULL, &set, &report, err, sizeof(err));
	}
	gslb_view_build_opts_t gopts = {.force = cli->opts.force};
	if (ret == 0)
		ret = server_gslb_build(conf, &gopts, &gslb, &report.warnings, err, sizeof(err));
	if (ret == 0)
		ret = auth_check_gslb_names(set, gslb, err, sizeof(err));
	/* Warnings go to the operator, not only to a log: print every one. */
	for (size_t i = 0; i < report.warnings.n; i++)
		fprintf(stderr, "warning: %s\n", report.warnings.msg[i]);
	if (ret != 0) {
		fprintf(stderr, "%s\n", err);
		fprintf(stderr, "steerd: configuration has errors\n");
	} else {
		size_t services, maps, whoami;
		gslb_view_counts(gslb, &services, &maps, &whoami);
		printf("%s: configuration OK, %zu zone(s)",
		       cli->opts.config_path ? cli->opts.config_path : "command line",
		       zone_set_count(set));
		if (services + maps + whoami > 0)
			printf(", %zu GSLB service(s), %zu map(s), %zu whoami name(s)", services,
			       maps, whoami);
		size_t upstreams = 0;
		for (size_t i = 0; i < conf->forward.n_groups; i++)
			upstreams += conf->forward.groups[i].n_upstreams;
		if (conf->forward.n_groups > 0)
			printf(", %zu forward group(s) with %zu upstream(s)",
			       conf->forward.n_groups, upstreams);
		putchar('\n');
	}
	gslb_view_free(gslb);
	server_report_clear(&report);
	zone_set_free(set);
	conf_free(conf);
	return ret == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static int run(const cli_t *cli)
{
	char err[SERVER_ERR_MAX];
	conf_t *conf = NULL;
	if (server_conf_build(&cli->opts, &conf, err, sizeof(err)) != 0) {
		log_err("%s", err);
		return EXIT_FAILURE;
	}
	/* A closed client connection must not kill the process; send() reports EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	server_t server;
	int ret = server_start(&server, &cli->opts, conf);
	if (ret == 0)
		server_run(&server);
	server_stop(&server);
	if (ret == 0)
		log_info("stopped");
	return ret == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char **argv)
{
	cli_t cli = {0};
	int ret = parse_args(argc, argv, &cli);
	if (ret != 0) {
		if (ret < 0)
			fprintf(stderr, "Try 'steerd --help'.\n");
		ret = ret < 0 ? EXIT_USAGE : EXIT_SUCCESS;
		goto out;
	}
	if (cli.reference && cli.reference_man) {
		ret = conf_write_reference_man(stdout, STEER_VERSION) == 0 ? EXIT_SUCCESS
		                                                           : EXIT_FAILURE;
	} else if (cli.reference) {
		conf_write_reference(stdout);
		ret = EXIT_SUCCESS;
	} else if (cli.check) {
		ret = check_config(&cli);
	} else {
		if (cli.opts.has_log_level)
			log_setup(LOG_TARGET_STDERR, cli.opts.log_level);
		ret = run(&cli);
	}
out:
	free(cli.opts.listen);
	free(cli.opts.zones);
	free(cli.opts.forward);
	free(cli.opts.allow_recursion);
	free(cli.opts.http);
	return ret;
}
