/*
 * The transport set: owns the UDP workers and TCP threads, the published view pointer and the
 * socket helpers. Everything here runs on the control thread; the query threads only read
 * net->view (RCU), net->stopping and the TCP settings.
 */
#include "net/net.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/nsid.h"
#include "net/net_int.h"
#include "net/tcp.h"
#include "net/udp.h"

/* RFC 7766 asks for concurrent TCP service, but each loop serves many clients, so a few
 * threads are enough and leave the CPUs to the UDP workers. */
#define TCP_WORKERS_DEFAULT_MAX 4

const uint64_t net_latency_bounds_ns[NET_LATENCY_BOUNDS] = {
    50000,    100000,   250000,   500000,    1000000,   2500000,   5000000,
    10000000, 25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
};

static unsigned cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : (unsigned)n;
}

net_t *net_new(const conf_t *conf, const net_view_t *view)
{
	net_t *net = xcalloc(1, sizeof(*net));
	net->view = (net_view_t *)view;
	net->n_listen = conf->n_listen;
	net->listen = xmemdup(conf->listen, conf->n_listen * sizeof(*conf->listen));
	unsigned cpus = cpu_count();
	net->n_workers = conf->workers ? conf->workers : cpus;
	net->n_tcp_workers = conf->tcp_workers;
	if (net->n_tcp_workers == 0)
		net->n_tcp_workers =
		    cpus < TCP_WORKERS_DEFAULT_MAX ? cpus : TCP_WORKERS_DEFAULT_MAX;
	net_reconfigure(net, conf);
	atomic_init(&net->stopping, false);
	atomic_init(&net->tcp_clients, 0);
	net->tcp_addr_conns = xcalloc(NET_TCP_SLOTS, sizeof(*net->tcp_addr_conns));
	net->tcp_prefix_conns = xcalloc(NET_TCP_SLOTS, sizeof(*net->tcp_prefix_conns));
	if (getrandom(net->tcp_hash_key, sizeof(net->tcp_hash_key), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(net->tcp_hash_key)) {
		/* No entropy yet (early boot): a clock-based key still differs per run. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		net->tcp_hash_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull;
		net->tcp_hash_key[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)net;
	}
	return net;
}

bool net_addr_is_wildcard(const steer_sockaddr_t *addr)
{
	if (addr->sa.sa_family == AF_INET)
		return addr->sin.sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&addr->sin6.sin6_addr);
}

int net_socket_bind(const steer_sockaddr_t *addr, int type, bool reuseport, char *err,
                    size_t errlen)
{
	char text[STEER_SOCKADDR_STRLEN];
	const char *proto = type == SOCK_DGRAM ? "UDP" : "TCP";
	const char *what = "socket";
	int one = 1;
	int fd = socket(addr->sa.sa_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	what = "setsockopt";
	/* SO_REUSEADDR lets a restarted daemon bind while old TCP connections sit in TIME_WAIT.
	 * Not for UDP, where it would let the probe share a port that another socket holds. */
	if (type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto fail;
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
		goto fail;
	/* Without V6ONLY, [::] would also claim the IPv4 port and collide with 0.0.0.0. */
	if (addr->sa.sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0)
		goto fail;
	what = "bind";
	if (bind(fd, &addr->sa, steer_sockaddr_len(addr)) != 0)
		goto fail;
	return fd;
fail:;
	int ret = -errno;
	snprintf(err, errlen, "cannot bind %s %s: %s failed: %s%s", proto,
	         steer_sockaddr_str(addr, text, sizeof(text)), what, steer_strerror(ret),
	         ret == -EADDRINUSE ? " (is another DNS server running?)" : "");
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * Bind address @p a once without SO_REUSEPORT, for UDP and TCP, and let go. This fails when
 * any other socket holds the port: with SO_REUSEPORT alone, a second steerd of the same user
 * would bind successfully and silently take a share of the first one's queries. The UDP
 * probe also resolves a port of 0, so that every socket of the address uses the same port.
 */
static int probe_address(net_t *net, size_t a, char *err, size_t errlen)
{
	steer_sockaddr_t *addr = &net->listen[a];
	int fd = net_socket_bind(addr, SOCK_DGRAM, false, err, errlen);
	if (fd < 0)
		return fd;
	socklen_t len = sizeof(*addr);
	if (steer_sockaddr_port(addr) == 0 && getsockname(fd, &addr->sa, &len) != 0) {
		int ret = -errno;
		snprintf(err, errlen, "getsockname failed: %s", steer_strerror(ret));
		close(fd);
		return ret;
	}
	int tfd = net_socket_bind(addr, SOCK_STREAM, false, err, errlen);
	close(fd);
	if (tfd < 0)
		return tfd;
	close(tfd);
	return 0;
}

int net_bind(net_t *net, char *err, size_t errlen)
{
	STEER_ASSERT(!net->bound);
	net->n_udp = (size_t)net->n_workers * net->n_listen;
	net->udp = xcalloc(net->n_udp, sizeof(*net->udp));
	net->n_tcp = net->n_tcp_workers;
	net->tcp = xcalloc(net->n_tcp, sizeof(*net->tcp));
	net->bound = true;

	for (size_t a = 0; a < net->n_listen; a++) {
		int ret = probe_address(net, a, err, errlen);
		if (ret != 0)
			return ret;
	}
	for (size_t w = 0; w < net->n_workers; w++) {
		for (size_t a = 0; a < net->n_listen; a++) {
			int ret = udp_worker_new(net, a, (unsigned)w,
			                         &net->udp[w * net->n_listen + a], err, errlen);
			if (ret != 0)
				return ret;
		}
	}
	for (size_t t = 0; t < net->n_tcp; t++) {
		int ret = tcp_worker_new(net, (unsigned)t, &net->tcp[t], err, errlen);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static int start_threads(net_t *net)
{
	for (size_t i = 0; i < net->n_udp; i++) {
		int ret = udp_worker_start(net->udp[i]);
		if (ret != 0)
			return ret;
	}
	for (size_t i = 0; i < net->n_tcp; i++) {
		int ret = tcp_worker_start(net->tcp[i]);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int net_start(net_t *net)
{
	STEER_ASSERT(net->bound && !net->started);
	net->started = true;
	/* Query threads inherit a fully blocked mask so SIGHUP/SIGTERM reach the control
	 * thread's event loop and never interrupt a worker's system call. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = start_threads(net);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret != 0) {
		log_err("cannot start query threads: %s", steer_strerror(ret));
		net_stop(net);
	}
	return ret;
}

uint64_t net_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool net_threads_ok(const net_t *net, unsigned max_age_ms, char *why, size_t whylen)
{
	uint64_t now = net_clock_ms();
	char name[16];
	for (size_t i = 0; i < net->n_udp; i++) {
		uint64_t silent = udp_worker_silence_ms(net->udp[i], now);
		if (silent > max_age_ms) {
			udp_worker_name(net->udp[i], name, sizeof(name));
			snprintf(why, whylen, "%s silent for %" PRIu64 " ms", name, silent);
			return false;
		}
	}
	for (size_t i = 0; i < net->n_tcp; i++) {
		uint64_t silent = tcp_worker_silence_ms(net->tcp[i], now);
		if (silent > max_age_ms) {
			tcp_worker_name(net->tcp[i], name, sizeof(name));
			snprintf(why, whylen, "%s silent for %" PRIu64 " ms", name, silent);
			return false;
		}
	}
	return true;
}

const net_view_t *net_publish(net_t *net, const net_view_t *view)
{
	net_view_t *old = rcu_xchg_pointer(&net->view, (net_view_t *)view);
	/* After the grace period no reader can still hold @c old. */
	synchronize_rcu();
	return old;
}

void net_reconfigure(net_t *net, const conf_t *conf)
{
	atomic_store_explicit(&net->tcp_max_clients, conf->tcp_max_clients, memory_order_relaxed);
	atomic_store_explicit(&net->tcp_idle_timeout, conf->tcp_idle_timeout, memory_order_relaxed);
	atomic_store_explicit(&net->tcp_io_timeout, conf->tcp_io_timeout, memory_order_relaxed);
	atomic_store_explicit(&net->tcp_max_per_address, conf->tcp_max_per_address,
	                      memory_order_relaxed);
	atomic_store_explicit(&net->tcp_max_per_prefix, conf->tcp_max_per_prefix,
	                      memory_order_relaxed);
}

const net_view_t *net_view(const net_t *net)
{
	return net->view;
}

void net_stats(const net_t *net, net_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < net->n_udp; i++) {
		if (net->udp[i] != NULL)
			udp_worker_stats(net->udp[i], out);
	}
	for (size_t i = 0; i < net->n_tcp; i++) {
		if (net->tcp[i] != NULL)
			tcp_worker_stats(net->tcp[i], out);
	}
	steer_counters_add((steer_counter_t *)&out->net.udp_latency,
	                   (const steer_counter_t *)&net->fwd_udp_latency,
	                   STEER_COUNTERS_IN(net_latency_t));
}

/* Every query thread's GSLB state, in a fixed order (UDP workers, then TCP threads). */
static gslb_qstate_t *thread_gslb(const net_t *net, size_t i)
{
	if (i < net->n_udp)
		return net->udp[i] ? &udp_worker_qctx(net->udp[i])->gslb : NULL;
	i -= net->n_udp;
	return i < net->n_tcp && net->tcp[i] ? &tcp_worker_qctx(net->tcp[i])->gslb : NULL;
}

void net_gslb_answers(const net_t *net, unsigned bank, uint64_t *out, size_t n, uint64_t *untracked)
{
	STEER_ASSERT(bank < 2 && n <= GSLB_ANSWER_SLOTS);
	memset(out, 0, n * sizeof(*out));
	*untracked = 0;
	for (size_t t = 0; t < net->n_udp + net->n_tcp; t++) {
		const gslb_qstate_t *qs = thread_gslb(net, t);
		if (qs == NULL)
			continue;
		for (size_t i = 0; i < n; i++)
			out[i] +=
			    atomic_load_explicit(&qs->answers.slot[bank][i], memory_order_relaxed);
		*untracked +=
		    atomic_load_explicit(&qs->answers.untracked[bank], memory_order_relaxed);
	}
}

void net_gslb_answers_clear(net_t *net, unsigned bank)
{
	STEER_ASSERT(bank < 2);
	for (size_t t = 0; t < net->n_udp + net->n_tcp; t++) {
		gslb_qstate_t *qs = thread_gslb(net, t);
		if (qs == NULL)
			continue;
		for (size_t i = 0; i < GSLB_ANSWER_SLOTS; i++)
			atomic_store_explicit(&qs->answers.slot[bank][i], 0, memory_order_relaxed);
		atomic_store_explicit(&qs->answers.untracked[bank], 0, memory_order_relaxed);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool forwardable(const net_view_t *view, const dns_query_t *q, dns_query_status_t status)
{
	/* A signed query is ours to verify (and answer signed), never a resolver's to pass on. */
	return view->fwd.engine != NULL && status == DNS_QUERY_OK &&
	       q->opcode == DNS_OPCODE_QUERY && q->has_question && q->tsig_offset == 0 &&
	       !auth_serves(&view->auth, q);
}

/* The forwarder's answers from the query thread carry the identity too (RFC 5001), within
 * what this client can receive. */
static size_t forwarded_nsid(const net_view_t *view, const auth_client_t *client,
                             const dns_query_t *q, uint8_t *resp, size_t rlen, size_t resp_cap)
{
	if (rlen == 0 || !q->has_nsid || view->auth.identity == NULL)
		return rlen;
	size_t limit = resp_cap;
	if (!client->tcp) {
		size_t udp = q->edns_payload < view->auth.udp_max_payload
		                 ? q->edns_payload
		                 : view->auth.udp_max_payload;
		limit = udp < limit ? udp : limit;
	}
	return dns_nsid_append(resp, rlen, limit, (const uint8_t *)view->auth.identity,
	                       view->auth.identity_len);
}

/* What net_answer() passes along to answer a query, once parsed. */
typedef struct {
	const net_view_t *view;
	const auth_client_t *client;
	const uint8_t *pkt;
	size_t len;
	uint8_t *resp;
	size_t resp_cap;
	auth_qctx_t *qctx;
	auth_axfr_t *axfr;
	fwd_serve_counters_t *fwd_ctr;
	fwd_client_fill_cb fill;
	void *fill_arg;
} answer_args_t;

/* The COOKIE option of a query the forwarder may answer: made here, where the view's
 * secrets and the client's address are known, so every answer (cache, engine, error) only
 * copies its bytes. */
typedef struct {
	bool on;                    /* the query had a COOKIE option and cookies are on */
	dns_cookie_status_t status; /* of its server cookie */
	uint8_t len;                /* bytes in opt */
	uint8_t opt[DNS_COOKIE_OPTION_LEN];
} fwd_cookie_t;

static void fwd_cookie_make(const auth_view_t *auth, const auth_client_t *client,
                            const dns_query_t *q, fwd_cookie_t *out)
{
	const uint8_t *ip;
	size_t ip_len;
	out->on = false;
	out->len = 0;
	if (!q->has_cookie || !auth->cookies_enable ||
	    !dns_cookie_client_ip(client->remote, &ip, &ip_len))
		return;
	uint32_t now = (uint32_t)time(NULL);
	out->on = true;
	out->status = dns_cookie_check(&auth->cookies, &q->cookie, ip, ip_len, now);
	out->len = (uint8_t)dns_cookie_write(&auth->cookies, &q->cookie, out->status, ip, ip_len,
	                                     now, out->opt);
}

static bool cookie_ok(const fwd_cookie_t *c)
{
	return c->status == DNS_COOKIE_VALID || c->status == DNS_COOKIE_STALE;
}

/* Counted as the authoritative path counts its queries, once the forwarder took the query. */
static void fwd_cookie_count(const fwd_cookie_t *c, auth_stats_t *stats)
{
	if (!c->on)
		return;
	STEER_COUNTER_INC(stats->cookie_queries);
	if (cookie_ok(c))
		STEER_COUNTER_INC(stats->cookie_valid);
	else if (c->status == DNS_COOKIE_INVALID)
		STEER_COUNTER_INC(stats->cookie_invalid);
}

/* The forwarder's answer, or FWD_SERVE_REFUSED to leave the query to auth_answer(). */
static fwd_serve_result_t forward_query(const answer_args_t *a, const dns_query_t *q, size_t *rlen)
{
	fwd_cookie_t ck;
	fwd_cookie_make(&a->view->auth, a->client, q, &ck);
	/* RFC 7873 5.2.3, as for our own names: with cookies.require a UDP query without a
	 * valid server cookie gets BADCOOKIE (auth_answer() writes and counts it), before
	 * any cache or upstream is asked. */
	if (ck.on && a->view->auth.cookies_require && !a->client->tcp && !cookie_ok(&ck))
		return FWD_SERVE_REFUSED;
	fwd_serve_client_t fc = {a->client->remote, a->client->tcp, a->fill,
	                         a->fill_arg,       ck.opt,         ck.len};
	fwd_serve_result_t r = fwd_serve(&a->view->fwd, q, a->pkt, a->len, &fc, now_ms(), a->resp,
	                                 a->resp_cap, rlen, a->fwd_ctr);
	if (r != FWD_SERVE_REFUSED)
		fwd_cookie_count(&ck, &a->qctx->stats);
	return r;
}

static size_t answer(const answer_args_t *a, dns_query_t *q, dns_query_status_t status,
                     bool forward, bool *deferred)
{
	if (forward) {
		size_t rlen;
		fwd_serve_result_t r = forward_query(a, q, &rlen);
		*deferred = r == FWD_SERVE_QUEUED;
		if (r != FWD_SERVE_REFUSED)
			return forwarded_nsid(a->view, a->client, q, a->resp, rlen, a->resp_cap);
	}
	return auth_answer_parsed(&a->view->auth, a->client, q, status, a->resp, a->resp_cap,
	                          a->qctx, a->axfr);
}

/* The transport's description of a client handed to the engine, marked as sampled. */
typedef struct {
	fwd_client_fill_cb fill;
	void *arg;
} tapped_fill_t;

static void tapped_fill(void *arg, fwd_client_t *out)
{
	const tapped_fill_t *t = arg;
	t->fill(t->arg, out);
	out->tapped = true;
}

static void tap_message(const net_tap_t *tap, const answer_args_t *a, tap_type_t type,
                        struct timespec query_time, size_t rlen)
{
	if (!tap_wants(tap->tap, type))
		return;
	bool response = type == TAP_AUTH_RESPONSE || type == TAP_CLIENT_RESPONSE;
	tap_msg_t m = {.type = type,
	               .tcp = a->client->tcp,
	               .query_address = a->client->remote,
	               .response_address = tap->local,
	               .query_time = query_time,
	               .query = a->pkt,
	               .query_len = a->len};
	if (response) {
		m.response = a->resp;
		m.response_len = rlen;
		m.response_time = tap_now();
	}
	(void)tap_log(tap->tap, &m);
}

/* A sampled query: logged as it came, answered, and its answer logged as it leaves. */
static size_t answer_tapped(const net_tap_t *tap, const answer_args_t *a, dns_query_t *q,
                            dns_query_status_t status, bool forward, bool *deferred)
{
	struct timespec query_time = tap_now();
	tap_message(tap, a, forward ? TAP_CLIENT_QUERY : TAP_AUTH_QUERY, query_time, 0);
	tapped_fill_t tf = {a->fill, a->fill_arg};
	answer_args_t marked = *a;
	marked.fill = tapped_fill;
	marked.fill_arg = &tf;
	size_t rlen = answer(&marked, q, status, forward, deferred);
	if (rlen > 0)
		tap_message(tap, a, forward ? TAP_CLIENT_RESPONSE : TAP_AUTH_RESPONSE, query_time,
		            rlen);
	return rlen;
}

size_t net_answer(const net_view_t *view, const auth_client_t *client, const uint8_t *pkt,
                  size_t len, uint8_t *resp, size_t resp_cap, auth_qctx_t *qctx, auth_axfr_t *axfr,
                  fwd_serve_counters_t *fwd_ctr, fwd_client_fill_cb fill, void *fill_arg,
                  const net_tap_t *tap, bool *deferred)
{
	dns_query_t q;
	dns_query_status_t status = dns_query_parse(pkt, len, &q);
	*deferred = false;
	answer_args_t a = {view, client, pkt,     len,  resp,    resp_cap,
	                   qctx, axfr,   fwd_ctr, fill, fill_arg};
	bool forward = forwardable(view, &q, status);
	if (STEER_UNLIKELY(tap->tap != NULL) && tap_sample(tap->tap))
		return answer_tapped(tap, &a, &q, status, forward, deferred);
	return answer(&a, &q, status, forward, deferred);
}

size_t net_listen_ports(const net_t *net, uint16_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < net->n_listen && n < max; i++) {
		uint16_t port = steer_sockaddr_port(&net->listen[i]);
		bool seen = false;
		for (size_t j = 0; j < n; j++)
			seen = seen || out[j] == port;
		if (!seen)
			out[n++] = port;
	}
	return n;
}

unsigned net_query_threads(const net_t *net)
{
	return (unsigned)(net->n_udp + net->n_tcp);
}

void net_set_tap(net_t *net, tap_t *tap)
{
	STEER_ASSERT(net->bound && !net->started);
	for (size_t i = 0; i < net->n_udp; i++)
		udp_worker_set_tap(net->udp[i], tap_thread(tap, (unsigned)i));
	for (size_t i = 0; i < net->n_tcp; i++)
		tcp_worker_set_tap(net->tcp[i], tap_thread(tap, (unsigned)(net->n_udp + i)));
}

void net_set_decision_log(net_t *net, gslb_decision_cb record, void *const *args, unsigned sample)
{
	STEER_ASSERT(net->bound && !net->started);
	for (size_t i = 0; i < net->n_udp + net->n_tcp; i++) {
		auth_qctx_t *qctx = i < net->n_udp ? udp_worker_qctx(net->udp[i])
		                                   : tcp_worker_qctx(net->tcp[i - net->n_udp]);
		qctx->gslb.decisions = (gslb_decision_sampler_t){
		    .record = record, .arg = args[i], .sample = sample, .countdown = 0};
	}
}

void net_set_demand(net_t *net, gslb_demand_ring_t *const *rings)
{
	STEER_ASSERT(net->bound && !net->started);
	for (size_t i = 0; i < net->n_udp + net->n_tcp; i++) {
		auth_qctx_t *qctx = i < net->n_udp ? udp_worker_qctx(net->udp[i])
		                                   : tcp_worker_qctx(net->tcp[i - net->n_udp]);
		qctx->gslb.demand = rings[i];
	}
}

size_t net_listen_count(const net_t *net)
{
	return net->n_listen;
}

const steer_sockaddr_t *net_listen_at(const net_t *net, size_t i)
{
	STEER_ASSERT(i < net->n_listen);
	return &net->listen[i];
}

unsigned net_workers(const net_t *net)
{
	return net->n_workers;
}

unsigned net_tcp_workers(const net_t *net)
{
	return net->n_tcp_workers;
}

unsigned net_tcp_clients(const net_t *net)
{
	return atomic_load_explicit(&((net_t *)net)->tcp_clients, memory_order_relaxed);
}

void net_stop(net_t *net)
{
	if (!net->started)
		return;
	atomic_store(&net->stopping, true);
	for (size_t i = 0; i < net->n_tcp; i++) {
		if (net->tcp[i] != NULL)
			tcp_worker_stop(net->tcp[i]);
	}
	for (size_t i = 0; i < net->n_udp; i++) {
		if (net->udp[i] != NULL)
			udp_worker_join(net->udp[i]);
	}
	net->started = false;
}

void net_free(net_t *net)
{
	if (net == NULL)
		return;
	net_stop(net);
	for (size_t i = 0; i < net->n_udp; i++)
		udp_worker_free(net->udp[i]);
	for (size_t i = 0; i < net->n_tcp; i++)
		tcp_worker_free(net->tcp[i]);
	free(net->udp);
	free(net->tcp);
	free(net->listen);
	free(net->tcp_addr_conns);
	free(net->tcp_prefix_conns);
	free(net);
}
