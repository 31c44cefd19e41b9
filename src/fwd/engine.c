/*
 * The forwarder engine's life cycle, the hand-off from the query threads, the control
 * thread's readers, and the pieces every part of the engine shares (clock, sockets, logging
 * of state changes).
 */
#include "fwd/engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "base/err.h"
#include "base/log.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "fwd/engine_int.h"

uint64_t fwd_eng_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t fwd_eng_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void fwd_eng_events(fwd_engine_t *e)
{
	fwd_upstream_event_t ev[16];
	for (;;) {
		uint64_t lost = 0;
		pthread_mutex_lock(&e->lock);
		size_t n = fwd_upstream_events(e->ups, ev, STEER_ARRAY_LEN(ev), &lost);
		pthread_mutex_unlock(&e->lock);
		if (lost)
			log_warn("forwarder: %llu upstream state changes were not logged",
			         (unsigned long long)lost);
		for (size_t i = 0; i < n; i++) {
			const fwd_eup_t *u = &e->eup[ev[i].upstream];
			log_info("upstream %s (%s): %s -> %s: %s", u->name, u->addr_str,
			         fwd_fault_str(ev[i].from), fwd_fault_str(ev[i].to), ev[i].reason);
		}
		if (n < STEER_ARRAY_LEN(ev))
			return;
	}
}

bool fwd_eng_local_error(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOBUFS || err == STEER_ENOMEM ||
	       err == STEER_ENOENT || err == STEER_ESPACE || err == STEER_EINVAL;
}

static bool recent_seen(const fwd_recent_t *r, uint16_t v)
{
	return (r->bits[v / 64] >> (v % 64)) & 1;
}

static void recent_add(fwd_recent_t *r, uint16_t v)
{
	uint32_t slot = r->n % FWD_RECENT;
	if (r->n >= FWD_RECENT) {
		uint16_t old = r->ring[slot];
		r->bits[old / 64] &= ~(UINT64_C(1) << (old % 64));
	}
	r->ring[slot] = v;
	r->bits[v / 64] |= UINT64_C(1) << (v % 64);
	r->n++;
}

void fwd_eng_fresh_id(fwd_engine_t *e, uint8_t *msg, fwd_wire_pending_t *p)
{
	uint16_t id = p->id;
	while (recent_seen(&e->recent_ids, id))
		id = (uint16_t)fwd_rng_u32(&e->rng);
	wire_write_u16(msg, id);
	p->id = id;
	recent_add(&e->recent_ids, id);
}

/* A random source port of the wide range, not excluded and not among the recent ones. */
static int fresh_port(fwd_engine_t *e)
{
	int port = STEER_ENOENT;
	/* One draw in 60 is recent: 16 draws leave a chance below 10^-28 of giving up. */
	for (int draw = 0; draw < 16; draw++) {
		port = fwd_wire_port_pick(&e->rng, FWD_WIRE_PORT_MIN, FWD_WIRE_PORT_MAX,
		                          (const uint16_t(*)[2])e->port_exclude, e->n_port_exclude);
		if (port < 0 || !recent_seen(&e->recent_ports, (uint16_t)port))
			return port;
	}
	return port;
}

int fwd_eng_udp_open(fwd_engine_t *e, uint32_t id)
{
	const fwd_eup_t *u = &e->eup[id];
	int family = u->address.sa.sa_family;
	int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	steer_sockaddr_t local;
	if (u->source.sa.sa_family == family) {
		local = u->source;
	} else {
		memset(&local, 0, sizeof(local));
		local.sa.sa_family = (sa_family_t)family;
	}
	int ret = STEER_ENOENT;
	for (int i = 0; i < FWD_BIND_TRIES; i++) {
		int port = fresh_port(e);
		if (port < 0) {
			ret = port;
			break;
		}
		if (family == AF_INET)
			local.sin.sin_port = htons((uint16_t)port);
		else
			local.sin6.sin6_port = htons((uint16_t)port);
		if (bind(fd, &local.sa, steer_sockaddr_len(&local)) == 0) {
			recent_add(&e->recent_ports, (uint16_t)port);
			ret = 0;
			break;
		}
		ret = -errno;
		if (ret != -EADDRINUSE)
			break;
	}
	/* Connected: the kernel drops datagrams from any other address or port. */
	if (ret == 0 && connect(fd, &u->address.sa, steer_sockaddr_len(&u->address)) != 0)
		ret = -errno;
	if (ret != 0) {
		close(fd);
		return ret;
	}
	return fd;
}

/* Move every queued submission to its place; the async watcher's callback. */
static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)revents;
	fwd_engine_t *e = w->data;
	struct cds_wfcq_node *node;
	while ((node = __cds_wfcq_dequeue_blocking(&e->qhead, &e->qtail)) != NULL) {
		fwd_node_t *n = caa_container_of(node, fwd_node_t, node);
		if (n->kind == FWD_NODE_FLUSH) {
			fwd_flush_cmd_t *cmd = (fwd_flush_cmd_t *)n;
			size_t dropped =
			    fwd_cache_flush(e->cache, cmd->all ? NULL : cmd->name, cmd->subtree);
			log_info("forwarder: cache flush dropped %zu entries", dropped);
			free(cmd);
			continue;
		}
		fwd_req_t *r = (fwd_req_t *)n;
		e->st.requests++;
		if (r->flags & FWD_SUBMIT_PREFETCH)
			e->st.prefetches++;
		r->e = e;
		r->prev = NULL;
		r->next = e->reqs;
		if (e->reqs)
			e->reqs->prev = r;
		e->reqs = r;
		fwd_eng_req_start(e, r);
	}
	if (atomic_load(&e->stopping))
		ev_break(loop, EVBREAK_ALL);
}

static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_engine_t *e = w->data;
	fwd_cache_sweep(e->cache, fwd_eng_now_ms(), FWD_SWEEP_VISIT);
}

/* Before the loop blocks: publish the counters for the control thread. */
static void on_publish(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_engine_t *e = w->data;
	pthread_mutex_lock(&e->lock);
	e->pub = e->st;
	pthread_mutex_unlock(&e->lock);
}

static void seed_rng(fwd_engine_t *e, uint64_t seed)
{
	uint8_t key[FWD_RNG_SEED_LEN];
	if (seed) {
		/* Tests: a fixed key, spread by splitmix64 so every word differs. */
		for (size_t i = 0; i < sizeof(key); i += 8) {
			uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			z ^= z >> 31;
			memcpy(key + i, &z, 8);
		}
	} else if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
		/* getrandom() without GRND_NONBLOCK only fails when interrupted: use the clock
		 * rather than abort a start-up, and say so. */
		log_warn("forwarder: getrandom failed, source ports and IDs seeded from the clock");
		uint64_t t = fwd_eng_now_us() ^ (uint64_t)(uintptr_t)e;
		for (size_t i = 0; i < sizeof(key); i += 8) {
			t = t * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(key + i, &t, 8);
		}
	}
	fwd_rng_init(&e->rng, key);
	memset(key, 0, sizeof(key));
}

static const char *policy_name(fwd_policy_t p)
{
	switch (p) {
	case FWD_POLICY_ORDERED:
		return "ordered";
	case FWD_POLICY_ROUND_ROBIN:
		return "round-robin";
	case FWD_POLICY_FASTEST:
		return "fastest";
	}
	return NULL;
}

/* The upstream set, built from copies of the definitions with the link devices filled in. */
static int make_upstreams(fwd_engine_t *e, const fwd_engine_opts_t *opts, uint64_t now, char *err,
                          size_t errlen)
{
	int ret = 0;
	size_t total = 0;
	for (size_t g = 0; g < opts->n_groups; g++)
		total += opts->groups[g].n_upstreams;
	fwd_group_def_t *defs = calloc(opts->n_groups, sizeof(*defs));
	fwd_upstream_def_t *ups = calloc(total ? total : 1, sizeof(*ups));
	char **owned = calloc(total ? total : 1, sizeof(*owned));
	if (!defs || !ups || !owned) {
		ret = STEER_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	size_t k = 0;
	for (size_t g = 0; g < opts->n_groups; g++) {
		defs[g] = opts->groups[g];
		if (defs[g].n_upstreams && !defs[g].upstreams) {
			ret = STEER_EINVAL;
			snprintf(err, errlen, "forward group %zu: no upstream list", g);
			goto out;
		}
		if (defs[g].n_upstreams)
			memcpy(ups + k, defs[g].upstreams, defs[g].n_upstreams * sizeof(*ups));
		defs[g].upstreams = ups + k;
		k += defs[g].n_upstreams;
	}
	fwd_eng_link_devices(ups, total, owned);
	ret = fwd_upstreams_new(defs, opts->n_groups,
	                        opts->seed ? opts->seed : fwd_rng_u32(&e->rng), now, &e->ups);
	if (ret) {
		snprintf(err, errlen, "forward groups: %s", steer_strerror(ret));
		goto out;
	}
	e->n_ups = fwd_upstreams_count(e->ups);
	e->eup = calloc(e->n_ups, sizeof(*e->eup));
	if (!e->eup) {
		ret = STEER_ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < e->n_ups; i++) {
		fwd_upstream_stats_t s;
		(void)fwd_upstream_stats(e->ups, i, &s);
		fwd_eup_t *u = &e->eup[i];
		u->name = s.name;
		u->link = s.link;
		u->address = s.address;
		u->source = s.source;
		u->group = s.group;
		u->link_up = true;
		const void *a = u->address.sa.sa_family == AF_INET6
		                    ? (const void *)&u->address.sin6.sin6_addr
		                    : (const void *)&u->address.sin.sin_addr;
		if (!inet_ntop(u->address.sa.sa_family, a, u->addr_str, sizeof(u->addr_str)))
			snprintf(u->addr_str, sizeof(u->addr_str), "?");
	}
out:
	for (size_t i = 0; owned && i < total; i++)
		free(owned[i]);
	free(owned);
	free(ups);
	free(defs);
	return ret;
}

static int copy_groups(fwd_engine_t *e, const fwd_engine_opts_t *opts, char *err, size_t errlen)
{
	e->groups = calloc(opts->n_groups, sizeof(*e->groups));
	if (!e->groups) {
		snprintf(err, errlen, "out of memory");
		return STEER_ENOMEM;
	}
	e->n_groups = opts->n_groups;
	for (size_t g = 0; g < opts->n_groups; g++) {
		const fwd_group_def_t *d = &opts->groups[g];
		fwd_egroup_t *eg = &e->groups[g];
		eg->domain = strdup(d->domain ? d->domain : "");
		if (!eg->domain) {
			snprintf(err, errlen, "out of memory");
			return STEER_ENOMEM;
		}
		eg->policy = d->policy;
		eg->budget_ms = d->budget_ms ? d->budget_ms : FWD_BUDGET_MS;
		const uint8_t *pn = opts->probe_names ? opts->probe_names[g] : NULL;
		if (pn) {
			size_t len = dname_len(pn);
			if (len == 0 || len > DNS_DNAME_MAXLEN || !dname_is_valid(pn, len)) {
				snprintf(err, errlen, "forward group %s: bad probe name",
				         eg->domain);
				return STEER_EINVAL;
			}
			memcpy(eg->probe_name, pn, len);
			eg->has_probe_name = true;
		}
	}
	return 0;
}

int fwd_engine_new(const fwd_engine_opts_t *opts, fwd_engine_t **out, char *err, size_t errlen)
{
	int ret = 0;
	*out = NULL;
	if (!opts->groups || opts->n_groups == 0) {
		snprintf(err, errlen, "forwarder: no upstream groups");
		return STEER_ERANGE;
	}
	fwd_engine_t *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return STEER_ENOMEM;
	}
	pthread_mutex_init(&e->lock, NULL);
	cds_wfcq_init(&e->qhead, &e->qtail);
	e->nl_fd = -1;
	e->max_pending = opts->max_pending ? opts->max_pending : FWD_ENGINE_MAX_PENDING;
	e->stale_after_ms = opts->stale_after_ms ? opts->stale_after_ms : FWD_ENGINE_STALE_AFTER_MS;
	e->use_0x20 = opts->use_0x20;
	e->udp_payload = opts->cache.edns_payload;
	seed_rng(e, opts->seed);
	if (opts->n_port_exclude) {
		if (!opts->port_exclude) {
			snprintf(err, errlen, "forwarder: port exclusions without a list");
			ret = STEER_EINVAL;
			goto out;
		}
		e->port_exclude = calloc(opts->n_port_exclude, sizeof(*e->port_exclude));
		if (!e->port_exclude) {
			snprintf(err, errlen, "out of memory");
			ret = STEER_ENOMEM;
			goto out;
		}
		memcpy(e->port_exclude, opts->port_exclude,
		       opts->n_port_exclude * sizeof(*e->port_exclude));
		e->n_port_exclude = opts->n_port_exclude;
	}
	ret = copy_groups(e, opts, err, errlen);
	if (ret)
		goto out;
	ret = make_upstreams(e, opts, fwd_eng_now_ms(), err, errlen);
	if (ret)
		goto out;
	ret = fwd_cache_new(&opts->cache, &e->cache);
	if (ret) {
		snprintf(err, errlen, "forwarder cache: %s", steer_strerror(ret));
		goto out;
	}
	e->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!e->loop) {
		snprintf(err, errlen, "cannot create the forwarder's event loop");
		ret = STEER_ENOMEM;
		goto out;
	}
	ev_async_init(&e->wake, on_wake);
	e->wake.data = e;
	ev_async_start(e->loop, &e->wake);
	ev_timer_init(&e->sweep_timer, on_sweep, 1., 1.);
	e->sweep_timer.data = e;
	ev_timer_start(e->loop, &e->sweep_timer);
	ev_prepare_init(&e->publish, on_publish);
	e->publish.data = e;
	ev_prepare_start(e->loop, &e->publish);
	ev_init(&e->probe_timer, fwd_eng_probe_timer_cb);
	e->probe_timer.data = e;
	ret = fwd_eng_link_open(e, err, errlen);
out:
	if (ret) {
		fwd_engine_free(e);
		return ret;
	}
	*out = e;
	return 0;
}

static void *engine_main(void *arg)
{
	fwd_engine_t *e = arg;
	rcu_register_thread();
	fwd_eng_link_initial(e);
	fwd_eng_probe_rearm(e);
	ev_run(e->loop, 0);
	rcu_unregister_thread();
	return NULL;
}

int fwd_engine_start(fwd_engine_t *e)
{
	if (e->started)
		return 0;
	atomic_store(&e->stopping, false);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int ret = pthread_create(&e->thread, NULL, engine_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret != 0)
		return -ret;
	pthread_setname_np(e->thread, "steer-fwd");
	e->started = true;
	return 0;
}

static void drop_queue(fwd_engine_t *e)
{
	struct cds_wfcq_node *node;
	while ((node = __cds_wfcq_dequeue_blocking(&e->qhead, &e->qtail)) != NULL) {
		fwd_node_t *n = caa_container_of(node, fwd_node_t, node);
		if (n->kind == FWD_NODE_REQ)
			atomic_fetch_sub(&e->pending, 1);
		free(n);
	}
}

void fwd_engine_stop(fwd_engine_t *e)
{
	if (!e->started)
		return;
	atomic_store(&e->stopping, true);
	ev_async_send(e->loop, &e->wake);
	pthread_join(e->thread, NULL);
	e->started = false;
	/* The loop no longer runs: its watchers can be stopped from here. */
	while (e->reqs)
		fwd_eng_req_free(e->reqs);
	while (e->probes)
		fwd_eng_probe_free(e->probes);
	drop_queue(e);
	on_publish(e->loop, &e->publish, 0);
}

void fwd_engine_free(fwd_engine_t *e)
{
	if (!e)
		return;
	fwd_engine_stop(e);
	while (e->reqs)
		fwd_eng_req_free(e->reqs);
	drop_queue(e);
	if (e->loop) {
		if (e->nl_fd >= 0)
			ev_io_stop(e->loop, &e->nl_io);
		ev_loop_destroy(e->loop);
	}
	if (e->nl_fd >= 0)
		close(e->nl_fd);
	fwd_cache_free(e->cache);
	fwd_upstreams_free(e->ups);
	for (size_t g = 0; e->groups && g < e->n_groups; g++)
		free(e->groups[g].domain);
	free(e->groups);
	free(e->eup);
	free(e->port_exclude);
	cds_wfcq_destroy(&e->qhead, &e->qtail);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

fwd_cache_t *fwd_engine_cache(fwd_engine_t *e)
{
	return e->cache;
}

int fwd_engine_submit(fwd_engine_t *e, const uint8_t *pkt, size_t len, const fwd_client_t *client,
                      unsigned flags)
{
	if (len > FWD_ENGINE_QUERY_MAX || len < DNS_HEADER_LEN)
		return STEER_EINVAL;
	if (atomic_load_explicit(&e->stopping, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&e->refused_full, 1, memory_order_relaxed);
		return STEER_EAGAIN;
	}
	/* Count first, so concurrent submitters can never overshoot max_pending together. */
	uint32_t n = atomic_fetch_add_explicit(&e->pending, 1, memory_order_relaxed);
	if (n >= e->max_pending) {
		atomic_fetch_sub_explicit(&e->pending, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&e->refused_full, 1, memory_order_relaxed);
		return STEER_EAGAIN;
	}
	fwd_req_t *r = malloc(sizeof(*r));
	if (!r) {
		atomic_fetch_sub_explicit(&e->pending, 1, memory_order_relaxed);
		return STEER_ENOMEM;
	}
	/* Only the head is set here; the engine thread initialises the rest. */
	cds_wfcq_node_init(&r->hdr.node);
	r->hdr.kind = FWD_NODE_REQ;
	r->client = *client;
	r->flags = flags;
	r->len = (uint16_t)len;
	memcpy(r->pkt, pkt, len);
	cds_wfcq_enqueue(&e->qhead, &e->qtail, &r->hdr.node);
	ev_async_send(e->loop, &e->wake);
	return 0;
}

int fwd_engine_flush(fwd_engine_t *e, const char *name, bool subtree)
{
	fwd_flush_cmd_t *cmd = calloc(1, sizeof(*cmd));
	if (!cmd)
		return STEER_ENOMEM;
	if (name) {
		if (dname_from_str(name, cmd->name) < 0) {
			free(cmd);
			return STEER_EINVAL;
		}
		cmd->subtree = subtree;
	} else {
		cmd->all = true;
	}
	cds_wfcq_node_init(&cmd->hdr.node);
	cmd->hdr.kind = FWD_NODE_FLUSH;
	cds_wfcq_enqueue(&e->qhead, &e->qtail, &cmd->hdr.node);
	ev_async_send(e->loop, &e->wake);
	return 0;
}

void fwd_engine_set_identity(fwd_engine_t *e, const char *identity)
{
	size_t len = identity != NULL ? strlen(identity) : 0;
	if (len >= sizeof(e->identity))
		len = sizeof(e->identity) - 1;
	pthread_mutex_lock(&e->lock);
	memcpy(e->identity, identity != NULL ? identity : "", len);
	e->identity_len = (uint8_t)len;
	pthread_mutex_unlock(&e->lock);
}

void fwd_engine_set_tap(fwd_engine_t *e, tap_thread_t *tap)
{
	e->tap = tap;
}

void fwd_engine_stats(fwd_engine_t *e, fwd_engine_stats_t *out)
{
	pthread_mutex_lock(&e->lock);
	*out = e->pub;
	pthread_mutex_unlock(&e->lock);
	out->refused_full = atomic_load_explicit(&e->refused_full, memory_order_relaxed);
	out->pending = atomic_load_explicit(&e->pending, memory_order_relaxed);
}

size_t fwd_engine_upstream_count(const fwd_engine_t *e)
{
	return e->n_ups;
}

int fwd_engine_upstream(fwd_engine_t *e, uint32_t id, fwd_upstream_stats_t *out)
{
	pthread_mutex_lock(&e->lock);
	int ret = fwd_upstream_stats(e->ups, id, out);
	pthread_mutex_unlock(&e->lock);
	return ret;
}

size_t fwd_engine_group_count(const fwd_engine_t *e)
{
	return e->n_groups;
}

const char *fwd_engine_group_domain(const fwd_engine_t *e, uint32_t group)
{
	return group < e->n_groups ? e->groups[group].domain : NULL;
}

const char *fwd_engine_group_policy(const fwd_engine_t *e, uint32_t group)
{
	return group < e->n_groups ? policy_name(e->groups[group].policy) : NULL;
}
