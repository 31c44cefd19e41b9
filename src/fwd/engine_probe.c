/*
 * Active probes on the engine thread. Each round sends, from the upstream's own source
 * address like its real queries, the recursive cache-busting query (can it resolve?) and the
 * liveness query (is it there at all?), and reports one combined outcome.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "fwd/engine_int.h"

static void leg_close(fwd_engine_t *e, fwd_probe_leg_t *l)
{
	if (l->fd < 0)
		return;
	ev_io_stop(e->loop, &l->io);
	close(l->fd);
	l->fd = -1;
}

void fwd_eng_probe_free(fwd_probe_run_t *run)
{
	fwd_engine_t *e = run->e;
	ev_timer_stop(e->loop, &run->timer);
	leg_close(e, &run->leg[0]);
	leg_close(e, &run->leg[1]);
	if (run->prev)
		run->prev->next = run->next;
	else
		e->probes = run->next;
	if (run->next)
		run->next->prev = run->prev;
	free(run);
}

static void finish(fwd_probe_run_t *run, fwd_probe_outcome_t outcome)
{
	fwd_engine_t *e = run->e;
	pthread_mutex_lock(&e->lock);
	(void)fwd_upstream_probe_result(e->ups, run->p.upstream, run->p.seq, outcome, run->rtt_us,
	                                fwd_eng_now_ms());
	pthread_mutex_unlock(&e->lock);
	fwd_eng_probe_free(run);
	fwd_eng_events(e);
	fwd_eng_probe_rearm(e);
}

/* Decide as soon as the legs allow: the recursive answer settles it, otherwise the liveness
 * answer tells "alive only" from "nothing" once the recursive leg has failed. */
static void decide(fwd_probe_run_t *run, bool timeout)
{
	const fwd_probe_leg_t *rec = &run->leg[0], *live = &run->leg[1];
	if (rec->done && rec->result == FWD_WIRE_PROBE_RESOLVES) {
		finish(run, FWD_PROBE_OK);
		return;
	}
	if (rec->done && rec->result == FWD_WIRE_PROBE_FAILS) {
		finish(run, FWD_PROBE_SERVFAIL);
		return;
	}
	if (!timeout && (!rec->done || !live->done))
		return;
	bool alive = live->done && live->result == FWD_WIRE_PROBE_ALIVE;
	finish(run, alive ? FWD_PROBE_ALIVE_ONLY : FWD_PROBE_TIMEOUT);
}

static void on_probe_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	decide(w->data, true);
}

static void on_leg(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_probe_leg_t *l = w->data;
	fwd_probe_run_t *run = l->run;
	fwd_engine_t *e = run->e;
	for (int i = 0; i < FWD_RECV_BURST; i++) {
		ssize_t n = recv(l->fd, e->rx, sizeof(e->rx), 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			/* Refused or unreachable: this leg will not be answered. */
			l->done = true;
			l->result = FWD_WIRE_PROBE_DROP;
			leg_close(e, l);
			decide(run, false);
			return;
		}
		fwd_wire_probe_result_t res =
		    fwd_wire_probe_check(&l->pend, l->kind, e->rx, (size_t)n, NULL, &e->st.wire);
		if (res == FWD_WIRE_PROBE_DROP)
			continue;
		if (l->kind == FWD_WIRE_PROBE_RECURSIVE) {
			uint64_t rtt = fwd_eng_now_us() - run->sent_us;
			run->rtt_us = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
		}
		l->done = true;
		l->result = res;
		leg_close(e, l);
		decide(run, false);
		return;
	}
}

/* Send one leg; returns 0, or a negative steer_err when it could not be sent (the leg is then
 * done without an answer). */
static int leg_send(fwd_probe_run_t *run, fwd_probe_leg_t *l, const char *nonce)
{
	fwd_engine_t *e = run->e;
	const fwd_egroup_t *g = &e->groups[e->eup[run->p.upstream].group];
	l->run = run;
	l->fd = -1;
	l->done = true; /* until sent */
	l->result = FWD_WIRE_PROBE_DROP;
	uint8_t q[FWD_WIRE_QUERY_MAXLEN];
	const uint8_t *name =
	    l->kind == FWD_WIRE_PROBE_RECURSIVE && g->has_probe_name ? g->probe_name : NULL;
	int qlen;
	if (l->kind == FWD_WIRE_PROBE_RECURSIVE && !name) {
		/* The root as the probe name: ask <nonce>. itself. */
		static const uint8_t root[1] = {0};
		name = root;
	}
	qlen = fwd_wire_probe_build(l->kind, name, nonce, 0, e->use_0x20, &e->rng, q, sizeof(q),
	                            &l->pend);
	if (qlen < 0)
		return qlen;
	fwd_eng_fresh_id(e, q, &l->pend);
	int fd = fwd_eng_udp_open(e, run->p.upstream);
	if (fd < 0) {
		e->st.socket_errors++;
		return fd;
	}
	if (send(fd, q, (size_t)qlen, 0) != qlen) {
		int ret = errno ? -errno : STEER_EAGAIN;
		close(fd);
		e->st.socket_errors++;
		return ret;
	}
	l->fd = fd;
	l->done = false;
	ev_io_init(&l->io, on_leg, fd, EV_READ);
	l->io.data = l;
	ev_io_start(e->loop, &l->io);
	return 0;
}

static void probe_start(fwd_engine_t *e, const fwd_probe_t *p)
{
	fwd_probe_run_t *run = calloc(1, sizeof(*run));
	if (!run)
		return; /* like a round that could not be sent: nothing to report */
	run->e = e;
	run->p = *p;
	run->next = e->probes;
	if (e->probes)
		e->probes->prev = run;
	e->probes = run;
	e->st.probes++;
	char nonce[FWD_WIRE_NONCE_LEN + 1];
	fwd_wire_probe_nonce(&e->rng, p->nonce, nonce);
	run->leg[0].kind = FWD_WIRE_PROBE_RECURSIVE;
	run->leg[1].kind = FWD_WIRE_PROBE_LIVENESS;
	run->sent_us = fwd_eng_now_us();
	ev_timer_init(&run->timer, on_probe_timeout, (p->timeout_ms ? p->timeout_ms : 1) / 1000.0,
	              0.);
	run->timer.data = run;
	int r0 = leg_send(run, &run->leg[0], nonce);
	int r1 = leg_send(run, &run->leg[1], nonce);
	if (fwd_eng_local_error(r0) || fwd_eng_local_error(r1)) {
		/* Out of descriptors or memory: a round we could not run proves nothing about
		 * the upstream, so none is reported (the schedule goes on without it). */
		fwd_eng_probe_free(run);
		return;
	}
	ev_timer_start(e->loop, &run->timer);
	if (run->leg[0].done && run->leg[1].done)
		decide(run, true); /* neither could be sent */
}

void fwd_eng_probe_rearm(fwd_engine_t *e)
{
	/* A round that cannot be sent finishes at once and re-enters from finish(); the depth
	 * is bounded by the number of upstreams, since each round moves its upstream's due
	 * time forward before it starts. */
	for (;;) {
		fwd_probe_t p;
		uint64_t due = 0;
		uint64_t now = fwd_eng_now_ms();
		pthread_mutex_lock(&e->lock);
		int ret = fwd_upstream_next_probe(e->ups, now, &p, &due);
		pthread_mutex_unlock(&e->lock);
		if (ret == 0) {
			probe_start(e, &p);
			continue;
		}
		ev_timer_stop(e->loop, &e->probe_timer);
		if (ret == STEER_EAGAIN) {
			double after = due > now ? (double)(due - now) / 1000.0 : 0.;
			ev_timer_set(&e->probe_timer, after, 0.);
			ev_timer_start(e->loop, &e->probe_timer);
		}
		return;
	}
}

void fwd_eng_probe_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	fwd_eng_probe_rearm(w->data);
}
