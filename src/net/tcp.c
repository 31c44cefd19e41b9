/*
 * TCP threads (RFC 7766). Each thread owns a libev loop, one SO_REUSEPORT listening socket per
 * listen address and its connections; nothing here is shared between threads except the
 * global connection count and the RCU-published view.
 *
 * A connection reads as much as its input buffer holds, answers the complete messages in
 * order into its output buffer (so pipelined queries are answered in order and small replies
 * leave in one send), and writes without blocking. While output is pending it is not read:
 * a client that does not read its answers cannot make us buffer more (back-pressure). An AXFR
 * is streamed: the next message is built only when the output buffer has room for it.
 *
 * A query the forwarder's engine answers (a cache miss) holds the connection's later messages
 * until its answer arrives, so answers stay in order: the engine hands the answer to this
 * thread through a wait-free queue and an ev_async. A connection closed while it waits stays
 * allocated (a "zombie", off the open list) until that answer arrives and is dropped, so the
 * engine's pointer to it is never dangling.
 *
 * Timeouts (one timer per connection, re-armed on every state change):
 *   idle:    no message in progress and nothing to send, measured from the last activity;
 *   message: a message has started arriving, measured from its first byte, so a client
 *            sending a byte at a time cannot keep the connection for long;
 *   write:   replies are pending and the client does not read, measured from the last byte
 *            the socket accepted (an AXFR to a slow but reading client goes on).
 * Under pressure (the pool TCP_PRESSURE_PCT % full) new deadlines use a fifth of the
 * configured idle and message/write timeouts, at least TCP_PRESSURE_MIN.
 *
 * Fair share. Every client address and every /24 (IPv4) or /56 (IPv6) may hold only so many
 * connections (server.tcp-max-clients-per-address, -per-prefix): a connection above either is
 * closed at accept. The counters live in the net_t, shared by every TCP thread without locks
 * (see there). When the whole pool is full, a newcomer takes the socket of an idle
 * connection of its own thread: each thread keeps its idle connections (nothing arriving,
 * nothing to send, no forwarded answer pending) in order of last activity, and the one
 * evicted is, among the TCP_EVICT_SCAN oldest, the one whose client holds the most
 * connections, provided that client holds at least as many as the newcomer's. Failing that,
 * a connection whose partial message has been arriving for TCP_EVICT_PARTIAL_AGE or more is
 * evicted (the oldest such message), if its client holds more connections than the
 * newcomer's. So a client with many sockets cannot take those of smaller ones, and a smaller
 * client can take its. Only then is the newcomer closed.
 * A thread evicts only its own connections, so a thread with none to give refuses while
 * another may still hold idle ones.
 */
#include "net/tcp.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <urcu.h>
#include <urcu/wfcqueue.h>

#include "auth/auth.h"
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "base/siphash.h"
#include "dns/const.h"

#define TCP_MSG_MAX DNS_MSG_MAXLEN
#define TCP_IN_CAP  (2 + TCP_MSG_MAX)
/* Room beyond one maximum reply, so that the replies to pipelined queries are batched into
 * one send: a reply is built only when a maximum-size one still fits. */
#define TCP_OUT_SLACK 16384
#define TCP_OUT_CAP   (2 + TCP_MSG_MAX + TCP_OUT_SLACK)
/* Connections accepted per readiness event, so one busy listener cannot starve the others. */
#define TCP_ACCEPT_BURST 64
/* Build/send rounds per event for one connection (an AXFR to a fast reader), after which the
 * loop serves the others and comes back through the write watcher. */
#define TCP_ROUNDS 8
/* Closed connections kept for reuse per thread: avoids an mmap/munmap of the buffers per
 * connection under connection churn. */
#define TCP_FREE_CONNS 32
/* Back-off when accept() runs out of descriptors or memory: the listener is level-triggered
 * and would otherwise spin. */
#define TCP_ACCEPT_PAUSE 0.1
/* The pool counts as under pressure from this share of tcp-max-clients on. */
#define TCP_PRESSURE_PCT 90
/* Shortest idle or message timeout under pressure, in seconds. */
#define TCP_PRESSURE_MIN 0.2
/* Idle connections looked at, oldest first, to find the client holding the most. */
#define TCP_EVICT_SCAN 8
/* A partial message this old (seconds) may be evicted for a smaller client: a real client's
 * query arrives in one or two segments, one round trip at most. */
#define TCP_EVICT_PARTIAL_AGE 0.1

typedef struct tcp_conn tcp_conn_t;

/* A doubly linked list of connections, newest at the head. */
typedef struct {
	tcp_conn_t *head, *tail;
} conn_list_t;

typedef struct {
	ev_io io;
	int fd;
} tcp_listener_t;

/* A forwarded answer on its way from the engine thread to the connection's thread. */
typedef struct {
	struct cds_wfcq_node node;
	tcp_conn_t *conn;
	size_t len;
	uint8_t msg[];
} tcp_fwd_answer_t;

struct tcp_worker {
	net_counters_t counters;      /* written by this thread only */
	fwd_serve_counters_t fwd_ctr; /* the forwarder's side on this thread */
	auth_qctx_t *qctx;            /* owned; this thread's answering state (counters, GSLB) */
	tap_thread_t *tap;            /* this thread's dnstap queue; NULL = no log */
	net_t *net;
	unsigned idx;
	struct ev_loop *loop;
	ev_async wake;
	ev_timer accept_pause;
	ev_timer heartbeat;
	atomic_uint_least64_t alive_ms; /* net_clock_ms() when the heartbeat last fired */
	pthread_t thread;
	bool started;
	tcp_listener_t *listeners;
	size_t n_listeners;
	/* Open connections, each on one list: idle ones by last activity (the tail is the
	 * oldest), those with a partial message by its first byte, and the rest. */
	conn_list_t idle;
	conn_list_t partial;
	conn_list_t busy;
	conn_list_t zombies; /* closed while waiting for a forwarded answer */
	ev_async fwd_wake;   /* forwarded answers queued */
	struct cds_wfcq_head fwd_head;
	struct cds_wfcq_tail fwd_tail;
	tcp_conn_t *free_conns;
	unsigned n_free;
};

struct tcp_conn {
	ev_io rio;
	ev_io wio;
	ev_timer timer;
	tcp_worker_t *w;
	tcp_conn_t *prev, *next;
	conn_list_t *on;                 /* the list holding it, NULL while on none */
	uint32_t addr_slot, prefix_slot; /* its counters in the client tables */
	int fd;
	bool v6;
	bool eof;           /* the client closed its side: answer what came, then close */
	bool in_axfr;       /* @c axfr holds a running transfer */
	bool msg_timing;    /* a partial message is arriving since @c msg_start */
	bool fwd_wait;      /* the engine answers the message at the head (consumed already) */
	bool zombie;        /* closed while @c fwd_wait: on w->zombies */
	uint64_t fwd_rx_ns; /* net_clock_ns() when the message the engine answers arrived */
	ev_tstamp msg_start;
	ev_tstamp activity; /* last byte received or sent */
	int outq;           /* kernel send queue when we started waiting to write */
	steer_sockaddr_t remote;
	steer_sockaddr_t local;    /* our address, for the dnstap log only (family 0 otherwise) */
	size_t in_start, in_end;   /* unconsumed input */
	size_t out_start, out_end; /* unsent output; both 0 when drained */
	auth_axfr_t axfr;
	uint8_t in[TCP_IN_CAP];
	uint8_t out[TCP_OUT_CAP];
};

static void conn_run(tcp_conn_t *c);

static const char *conn_str(const tcp_conn_t *c, char *buf, size_t size)
{
	return steer_sockaddr_str(&c->remote, buf, size);
}

static void list_remove(tcp_conn_t *c)
{
	conn_list_t *l = c->on;
	if (l == NULL)
		return;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->on = NULL;
}

static void list_push(conn_list_t *l, tcp_conn_t *c)
{
	list_remove(c);
	c->prev = NULL;
	c->next = l->head;
	if (l->head != NULL)
		l->head->prev = c;
	else
		l->tail = c;
	l->head = c;
	c->on = l;
}

/* ---- the client tables ---------------------------------------------------------------- */

/* SipHash-1-3 of three words: keyed, so that a client cannot pick addresses that share a
 * counter with the one it wants to crowd out. */
static uint64_t client_hash(const uint64_t key[2], const uint64_t m[3])
{
	return steer_siphash13(key[0], key[1], m, 3 * sizeof(*m));
}

/* The counters of @p remote's address and of its /24 or /56. */
static void client_slots(const net_t *net, const steer_sockaddr_t *remote, uint32_t *addr,
                         uint32_t *prefix)
{
	uint8_t ip[16] = {0};
	uint64_t family;
	size_t prefix_bytes;
	if (remote->sa.sa_family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&remote->sin6.sin6_addr)) {
		memcpy(ip, &remote->sin6.sin6_addr, 16);
		family = 6;
		prefix_bytes = 7;
	} else {
		if (remote->sa.sa_family == AF_INET6)
			memcpy(ip, remote->sin6.sin6_addr.s6_addr + 12, 4);
		else
			memcpy(ip, &remote->sin.sin_addr, 4);
		family = 4;
		prefix_bytes = 3;
	}
	uint64_t m[3];
	memcpy(&m[0], ip, 8);
	memcpy(&m[1], ip + 8, 8);
	m[2] = family;
	*addr = (uint32_t)(client_hash(net->tcp_hash_key, m) & (NET_TCP_SLOTS - 1));
	memset(ip + prefix_bytes, 0, sizeof(ip) - prefix_bytes);
	memcpy(&m[0], ip, 8);
	memcpy(&m[1], ip + 8, 8);
	m[2] = family | 0x100; /* a prefix never shares a hash input with an address */
	*prefix = (uint32_t)(client_hash(net->tcp_hash_key, m) & (NET_TCP_SLOTS - 1));
}

static unsigned slot_load(atomic_uint *table, uint32_t slot)
{
	return atomic_load_explicit(&table[slot], memory_order_relaxed);
}

/* Take one connection from @p table[@p slot] under @p max (0: no limit). */
static bool slot_take(atomic_uint *table, uint32_t slot, unsigned max)
{
	unsigned n = atomic_fetch_add_explicit(&table[slot], 1, memory_order_relaxed);
	if (max == 0 || n < max)
		return true;
	atomic_fetch_sub_explicit(&table[slot], 1, memory_order_relaxed);
	return false;
}

static void slot_give(atomic_uint *table, uint32_t slot)
{
	atomic_fetch_sub_explicit(&table[slot], 1, memory_order_relaxed);
}

static void client_release(net_t *net, uint32_t addr, uint32_t prefix)
{
	slot_give(net->tcp_addr_conns, addr);
	slot_give(net->tcp_prefix_conns, prefix);
	atomic_fetch_sub_explicit(&net->tcp_clients, 1, memory_order_relaxed);
}

static void conn_recycle(tcp_worker_t *w, tcp_conn_t *c)
{
	if (w->n_free < TCP_FREE_CONNS) {
		c->next = w->free_conns;
		w->free_conns = c;
		w->n_free++;
	} else {
		free(c);
	}
}

static void conn_close(tcp_conn_t *c)
{
	tcp_worker_t *w = c->w;
	ev_io_stop(w->loop, &c->rio);
	ev_io_stop(w->loop, &c->wio);
	ev_timer_stop(w->loop, &c->timer);
	close(c->fd);
	if (c->in_axfr)
		auth_axfr_cleanup(&c->axfr);
	list_remove(c);
	client_release(w->net, c->addr_slot, c->prefix_slot);
	if (c->fwd_wait) {
		c->zombie = true;
		list_push(&w->zombies, c);
		return;
	}
	conn_recycle(w, c);
}

/* Length of the complete message at the head of the input, or -1 when it is not all here. */
static long conn_message_len(const tcp_conn_t *c)
{
	size_t avail = c->in_end - c->in_start;
	if (avail < 2)
		return -1;
	size_t len = (size_t)c->in[c->in_start] << 8 | c->in[c->in_start + 1];
	return avail >= 2 + len ? (long)len : -1;
}

static bool conn_out_room(const tcp_conn_t *c)
{
	return TCP_OUT_CAP - c->out_end >= 2 + TCP_MSG_MAX;
}

static void conn_push(tcp_conn_t *c, size_t len)
{
	c->out[c->out_end] = (uint8_t)(len >> 8);
	c->out[c->out_end + 1] = (uint8_t)len;
	c->out_end += 2 + len;
}

/*
 * The engine's answer to a forwarded query, on the engine thread: queue it to the thread that
 * owns the connection. Without memory the answer is lost and the connection times out.
 */
static void tcp_fwd_reply(const fwd_client_t *client, const uint8_t *reply, size_t len)
{
	tcp_worker_t *w = client->transport;
	if (len > TCP_MSG_MAX)
		len = 0; /* cannot be framed: answered as a lost reply, the client times out */
	tcp_fwd_answer_t *a = malloc(sizeof(*a) + len);
	if (a == NULL)
		return;
	cds_wfcq_node_init(&a->node);
	a->conn = (tcp_conn_t *)(uintptr_t)client->token;
	a->len = len;
	memcpy(a->msg, reply, len);
	cds_wfcq_enqueue(&w->fwd_head, &w->fwd_tail, &a->node);
	ev_async_send(w->loop, &w->fwd_wake);
}

static void tcp_client_fill(void *arg, fwd_client_t *out)
{
	tcp_conn_t *c = arg;
	memset(out, 0, sizeof(*out));
	out->reply = tcp_fwd_reply;
	out->transport = c->w;
	out->token = (uint64_t)(uintptr_t)c;
	out->fd = -1;
	out->tcp = true;
	out->remote = c->remote;
}

static void conn_answer(tcp_conn_t *c, size_t len)
{
	tcp_worker_t *w = c->w;
	auth_client_t client = {.remote = &c->remote, .tcp = true};
	const uint8_t *msg = c->in + c->in_start + 2;
	uint64_t rx_ns = net_clock_ns();
	STEER_COUNTER_INC(w->counters.tcp_queries);
	if (c->v6) {
		STEER_COUNTER_INC(w->counters.ipv6_queries);
		STEER_COUNTER_INC(w->counters.tcp_ipv6_queries);
	} else {
		STEER_COUNTER_INC(w->counters.tcp_ipv4_queries);
	}
	c->axfr.zone = NULL;
	bool deferred;
	rcu_read_lock();
	const net_view_t *view = rcu_dereference(w->net->view);
	net_tap_t tap = {w->tap, &c->local};
	size_t rlen =
	    net_answer(view, &client, msg, len, c->out + c->out_end + 2, TCP_MSG_MAX, w->qctx,
	               &c->axfr, &w->fwd_ctr, tcp_client_fill, c, &tap, &deferred);
	rcu_read_unlock();
	c->in_start += 2 + len;
	c->msg_timing = false;
	c->fwd_wait = deferred;
	c->fwd_rx_ns = rx_ns;
	/* From the complete message to the reply queued for the socket, which the same loop
	 * turn writes: TCP's own send delays are the connection's, not the server's. */
	if (rlen > 0) {
		conn_push(c, rlen);
		net_latency_observe(&w->counters.tcp_latency, net_clock_ns() - rx_ns);
	}
	if (c->axfr.zone != NULL) {
		c->in_axfr = rlen > 0;
		if (!c->in_axfr)
			auth_axfr_cleanup(&c->axfr);
	}
}

static void conn_axfr_step(tcp_conn_t *c)
{
	size_t rlen = auth_axfr_next(&c->axfr, c->out + c->out_end + 2, TCP_MSG_MAX);
	if (rlen > 0) {
		conn_push(c, rlen);
		return;
	}
	auth_axfr_cleanup(&c->axfr);
	c->in_axfr = false;
}

/* Build replies (or transfer messages) while the output buffer has room for one more. */
static void conn_fill(tcp_conn_t *c)
{
	while (conn_out_room(c) && !c->fwd_wait) {
		if (c->in_axfr) {
			conn_axfr_step(c);
			continue;
		}
		long len = conn_message_len(c);
		if (len < 0)
			break;
		if (len == 0) {
			/* No DNS message is empty: the client is broken or probing. Answers to
			 * what came before still go out, then the connection closes. */
			c->in_start = c->in_end;
			c->eof = true;
			c->msg_timing = false;
			break;
		}
		conn_answer(c, (size_t)len);
	}
	if (c->in_start == c->in_end)
		c->in_start = c->in_end = 0;
}

/* Bytes the kernel holds for the client (unsent or unacknowledged), or -1. */
static int conn_outq(const tcp_conn_t *c)
{
	int n;
	return ioctl(c->fd, SIOCOUTQ, &n) == 0 ? n : -1;
}

/* Send what the socket takes. Returns 0, or -1 when the connection is broken. */
static int conn_flush(tcp_conn_t *c)
{
	while (c->out_start < c->out_end) {
		ssize_t n =
		    send(c->fd, c->out + c->out_start, c->out_end - c->out_start, MSG_NOSIGNAL);
		if (n > 0) {
			c->out_start += (size_t)n;
			c->activity = ev_now(c->w->loop);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return 0;
		} else {
			return -1;
		}
	}
	c->out_start = c->out_end = 0;
	return 0;
}

static void watcher_set(struct ev_loop *loop, ev_io *io, bool on)
{
	if (on && !ev_is_active(io))
		ev_io_start(loop, io);
	else if (!on && ev_is_active(io))
		ev_io_stop(loop, io);
}

static ev_tstamp timeout_of(atomic_uint *ms)
{
	return atomic_load_explicit(ms, memory_order_relaxed) / 1000.;
}

static bool pool_pressed(net_t *net)
{
	unsigned max = atomic_load_explicit(&net->tcp_max_clients, memory_order_relaxed);
	unsigned n = atomic_load_explicit(&net->tcp_clients, memory_order_relaxed);
	return (uint64_t)n * 100 >= (uint64_t)max * TCP_PRESSURE_PCT;
}

static ev_tstamp pressed_timeout(ev_tstamp t)
{
	ev_tstamp shorter = t / 5;
	if (shorter < TCP_PRESSURE_MIN)
		shorter = t < TCP_PRESSURE_MIN ? t : TCP_PRESSURE_MIN;
	return shorter;
}

static void conn_arm_timer(tcp_conn_t *c, bool busy, bool partial)
{
	tcp_worker_t *w = c->w;
	ev_tstamp now = ev_now(w->loop);
	ev_tstamp io_timeout = timeout_of(&w->net->tcp_io_timeout);
	ev_tstamp idle_timeout = timeout_of(&w->net->tcp_idle_timeout);
	if (pool_pressed(w->net)) {
		io_timeout = pressed_timeout(io_timeout);
		idle_timeout = pressed_timeout(idle_timeout);
	}
	ev_tstamp deadline;
	if (busy) {
		deadline = c->activity + io_timeout;
	} else if (partial) {
		if (!c->msg_timing) {
			c->msg_timing = true;
			c->msg_start = now;
		}
		deadline = c->msg_start + io_timeout;
	} else {
		deadline = c->activity + idle_timeout;
	}
	ev_timer_stop(w->loop, &c->timer);
	ev_timer_set(&c->timer, deadline > now ? deadline - now : 0., 0.);
	ev_timer_start(w->loop, &c->timer);
}

/* Choose what to wait for next, from the buffers' state. */
static void conn_update(tcp_conn_t *c)
{
	bool pending = c->out_end != 0;
	bool work = c->in_axfr || (!c->fwd_wait && conn_message_len(c) >= 0);
	bool partial = !work && !c->fwd_wait && c->in_end > c->in_start;
	if (c->eof && !pending && !work && !c->fwd_wait) {
		conn_close(c);
		return;
	}
	watcher_set(c->w->loop, &c->rio, !c->eof && !pending && !work && !c->fwd_wait);
	watcher_set(c->w->loop, &c->wio, pending || work);
	if (pending || work)
		c->outq = conn_outq(c);
	conn_arm_timer(c, pending || work, partial);
	/* Idle ones move to the head on every event (last activity order); partial ones
	 * only when their message starts (first byte order). */
	tcp_worker_t *w = c->w;
	if (!pending && !work && !partial && !c->fwd_wait) {
		list_push(&w->idle, c);
	} else if (partial && !pending) {
		if (c->on != &w->partial)
			list_push(&w->partial, c);
	} else if (c->on != &w->busy) {
		list_push(&w->busy, c);
	}
}

static void conn_run(tcp_conn_t *c)
{
	for (int round = 0; round < TCP_ROUNDS; round++) {
		conn_fill(c);
		if (conn_flush(c) != 0) {
			conn_close(c);
			return;
		}
		if (c->out_end != 0 || c->fwd_wait || (!c->in_axfr && conn_message_len(c) < 0))
			break;
	}
	conn_update(c);
}

static void on_conn_read(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)revents;
	tcp_conn_t *c = io->data;
	if (c->in_start > 0) {
		memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
		c->in_end -= c->in_start;
		c->in_start = 0;
	}
	/* Cannot be 0: a partial message is shorter than the buffer after compaction. */
	size_t room = TCP_IN_CAP - c->in_end;
	STEER_ASSERT(room > 0);
	ssize_t n = recv(c->fd, c->in + c->in_end, room, 0);
	if (n > 0) {
		c->in_end += (size_t)n;
		c->activity = ev_now(loop);
	} else if (n == 0) {
		c->eof = true;
	} else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
		return;
	} else {
		conn_close(c);
		return;
	}
	conn_run(c);
}

static void on_conn_write(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	(void)revents;
	conn_run(io->data);
}

/*
 * A client that reads slowly (a large AXFR into a slow link) only frees space in a large
 * kernel send buffer, and the socket becomes writable again only after much of it drained:
 * user-space progress alone would call it stalled. Its kernel queue shrinking is progress.
 */
static bool conn_still_reading(tcp_conn_t *c)
{
	int q = conn_outq(c);
	if (q < 0 || q >= c->outq)
		return false;
	c->outq = q;
	c->activity = ev_now(c->w->loop);
	conn_update(c);
	return true;
}

static void on_conn_timer(struct ev_loop *loop, ev_timer *timer, int revents)
{
	(void)loop;
	(void)revents;
	tcp_conn_t *c = timer->data;
	if ((c->out_end != 0 || c->in_axfr) && conn_still_reading(c))
		return;
	if (log_enabled(LOG_LEVEL_DEBUG)) {
		char text[STEER_SOCKADDR_STRLEN];
		log_debug("TCP %s: timed out (%s)", conn_str(c, text, sizeof(text)),
		          c->out_end != 0 || c->in_axfr ? "client not reading"
		          : c->msg_timing               ? "incomplete message"
		                                        : "idle");
	}
	conn_close(c);
}

static tcp_conn_t *conn_alloc(tcp_worker_t *w)
{
	tcp_conn_t *c = w->free_conns;
	if (c != NULL) {
		w->free_conns = c->next;
		w->n_free--;
		return c;
	}
	/* Not xmalloc: running out of memory under a connection flood must not abort. */
	return malloc(sizeof(*c));
}

static void conn_open(tcp_worker_t *w, int fd, const steer_sockaddr_t *remote, uint32_t addr_slot,
                      uint32_t prefix_slot)
{
	tcp_conn_t *c = conn_alloc(w);
	if (c == NULL) {
		close(fd);
		client_release(w->net, addr_slot, prefix_slot);
		return;
	}
	/* Field by field: clearing the buffers would touch 140 kB per connection. */
	c->w = w;
	c->fd = fd;
	c->on = NULL;
	c->addr_slot = addr_slot;
	c->prefix_slot = prefix_slot;
	c->remote = *remote;
	c->local.sa.sa_family = 0;
	socklen_t local_len = sizeof(c->local);
	if (w->tap != NULL && getsockname(fd, &c->local.sa, &local_len) != 0)
		c->local.sa.sa_family = 0;
	c->v6 = remote->sa.sa_family == AF_INET6;
	c->eof = c->in_axfr = c->msg_timing = c->fwd_wait = c->zombie = false;
	c->outq = 0;
	c->activity = ev_now(w->loop);
	c->in_start = c->in_end = c->out_start = c->out_end = 0;
	c->axfr.zone = NULL;
	ev_io_init(&c->rio, on_conn_read, fd, EV_READ);
	ev_io_init(&c->wio, on_conn_write, fd, EV_WRITE);
	ev_init(&c->timer, on_conn_timer);
	c->rio.data = c->wio.data = c->timer.data = c;
	conn_update(c);
}

static void accept_pause(tcp_worker_t *w)
{
	for (size_t i = 0; i < w->n_listeners; i++)
		ev_io_stop(w->loop, &w->listeners[i].io);
	ev_timer_set(&w->accept_pause, TCP_ACCEPT_PAUSE, 0.);
	ev_timer_start(w->loop, &w->accept_pause);
}

static void on_accept_resume(struct ev_loop *loop, ev_timer *timer, int revents)
{
	(void)revents;
	tcp_worker_t *w = timer->data;
	for (size_t i = 0; i < w->n_listeners; i++)
		ev_io_start(loop, &w->listeners[i].io);
}

/*
 * Make room for a newcomer holding @p addr_slot when the pool is full: close one of this
 * thread's connections (see the top of the file). Returns false when none may go.
 */
static bool evict_one(tcp_worker_t *w, uint32_t addr_slot)
{
	atomic_uint *addrs = w->net->tcp_addr_conns;
	/* What the newcomer's client held before it (it is counted already). */
	unsigned mine = slot_load(addrs, addr_slot) - 1;
	tcp_conn_t *victim = NULL;
	unsigned most = 0;
	int scanned = 0;
	for (tcp_conn_t *c = w->idle.tail; c != NULL && scanned < TCP_EVICT_SCAN;
	     c = c->prev, scanned++) {
		unsigned held = slot_load(addrs, c->addr_slot);
		if (victim == NULL || held > most) {
			victim = c;
			most = held;
		}
	}
	/* Never for a client holding more than the one that would lose the socket: a flood of
	 * newcomers from one client cannot push out the idle connections of small ones. */
	if (victim != NULL && most < mine)
		victim = NULL;
	if (victim == NULL) {
		/* The oldest partial message, if old enough, of another client holding more
		 * connections than the newcomer's. */
		tcp_conn_t *c = w->partial.tail;
		if (c == NULL || c->addr_slot == addr_slot ||
		    ev_now(w->loop) - c->msg_start < TCP_EVICT_PARTIAL_AGE ||
		    slot_load(addrs, c->addr_slot) <= mine)
			return false;
		victim = c;
	}
	if (log_enabled(LOG_LEVEL_DEBUG)) {
		char text[STEER_SOCKADDR_STRLEN];
		log_debug("TCP %s: evicted (%s) for a new connection, the pool is full",
		          conn_str(victim, text, sizeof(text)),
		          victim->on == &w->idle ? "idle" : "slow message");
	}
	STEER_COUNTER_INC(w->counters.tcp_evicted);
	conn_close(victim);
	return true;
}

/* Returns false when accepting should stop for this event. */
static bool accept_one(tcp_worker_t *w, int lfd)
{
	static log_ratelimit_t rl_err, rl_full, rl_share;
	steer_sockaddr_t remote;
	socklen_t len = sizeof(remote);
	int fd = accept4(lfd, &remote.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EINTR || errno == ECONNABORTED)
			return true;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			log_ratelimited(&rl_err, LOG_LEVEL_ERR, "TCP accept failed: %s",
			                steer_strerror(-errno));
			accept_pause(w);
		}
		return false;
	}
	net_t *net = w->net;
	uint32_t addr_slot, prefix_slot;
	client_slots(net, &remote, &addr_slot, &prefix_slot);
	unsigned max_addr = atomic_load_explicit(&net->tcp_max_per_address, memory_order_relaxed);
	unsigned max_prefix = atomic_load_explicit(&net->tcp_max_per_prefix, memory_order_relaxed);
	const char *over = NULL;
	if (!slot_take(net->tcp_addr_conns, addr_slot, max_addr)) {
		STEER_COUNTER_INC(w->counters.tcp_refused_address);
		over = "address";
	} else if (!slot_take(net->tcp_prefix_conns, prefix_slot, max_prefix)) {
		slot_give(net->tcp_addr_conns, addr_slot);
		STEER_COUNTER_INC(w->counters.tcp_refused_prefix);
		over = "prefix";
	}
	if (over != NULL) {
		close(fd);
		if (log_enabled(LOG_LEVEL_INFO)) {
			char text[STEER_SOCKADDR_STRLEN];
			log_ratelimited(&rl_share, LOG_LEVEL_INFO,
			                "TCP %s: over its %s's share of connections, closing it",
			                steer_sockaddr_str(&remote, text, sizeof(text)), over);
		}
		return true;
	}
	unsigned max = atomic_load_explicit(&net->tcp_max_clients, memory_order_relaxed);
	unsigned n = atomic_fetch_add_explicit(&net->tcp_clients, 1, memory_order_relaxed);
	if (n >= max && !evict_one(w, addr_slot)) {
		client_release(net, addr_slot, prefix_slot);
		close(fd);
		STEER_COUNTER_INC(w->counters.tcp_refused_full);
		log_ratelimited(&rl_full, LOG_LEVEL_WARNING,
		                "TCP client limit (%u) reached and no idle connection to evict, "
		                "closing new connections",
		                max);
		return true;
	}
	/* Replies must not wait for the ACK of the previous one (Nagle vs. delayed ACK). */
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	conn_open(w, fd, &remote, addr_slot, prefix_slot);
	return true;
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	(void)revents;
	tcp_worker_t *w = io->data;
	for (int i = 0; i < TCP_ACCEPT_BURST; i++) {
		if (!accept_one(w, io->fd))
			break;
	}
}

/* Forwarded answers from the engine: each goes to its connection, which then goes on. */
static void on_fwd_answers(struct ev_loop *loop, ev_async *async, int revents)
{
	(void)loop;
	(void)revents;
	tcp_worker_t *w = async->data;
	struct cds_wfcq_node *node;
	/* This thread is the only consumer, as the non-locking dequeue requires. */
	while ((node = __cds_wfcq_dequeue_blocking(&w->fwd_head, &w->fwd_tail)) != NULL) {
		tcp_fwd_answer_t *a = caa_container_of(node, tcp_fwd_answer_t, node);
		tcp_conn_t *c = a->conn;
		c->fwd_wait = false;
		if (c->zombie) {
			list_remove(c);
			conn_recycle(w, c);
		} else {
			c->activity = ev_now(w->loop);
			if (a->len > 0) {
				memcpy(c->out + c->out_end + 2, a->msg, a->len);
				conn_push(c, a->len);
				net_latency_observe(&w->counters.tcp_latency,
				                    net_clock_ns() - c->fwd_rx_ns);
			}
			conn_run(c);
		}
		free(a);
	}
}

static void on_wake(struct ev_loop *loop, ev_async *async, int revents)
{
	(void)async;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

static void on_heartbeat(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	tcp_worker_t *w = t->data;
	net_heartbeat(&w->alive_ms);
}

static void conn_close_all(tcp_worker_t *w)
{
	conn_list_t *lists[] = {&w->idle, &w->partial, &w->busy};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		while (lists[i]->head != NULL)
			conn_close(lists[i]->head);
	}
}

static void *tcp_worker_main(void *arg)
{
	tcp_worker_t *w = arg;
	rcu_register_thread();
	ev_run(w->loop, 0);
	conn_close_all(w);
	rcu_unregister_thread();
	return NULL;
}

static int listener_open(tcp_worker_t *w, const steer_sockaddr_t *addr, char *err, size_t errlen)
{
	int fd = net_socket_bind(addr, SOCK_STREAM, true, err, errlen);
	if (fd < 0)
		return fd;
	int one = 1;
	if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		int ret = -errno;
		char text[STEER_SOCKADDR_STRLEN];
		snprintf(err, errlen, "cannot listen on TCP %s: %s",
		         steer_sockaddr_str(addr, text, sizeof(text)), steer_strerror(ret));
		close(fd);
		return ret;
	}
	tcp_listener_t *l = &w->listeners[w->n_listeners++];
	l->fd = fd;
	ev_io_init(&l->io, on_accept, fd, EV_READ);
	l->io.data = w;
	ev_io_start(w->loop, &l->io);
	return 0;
}

int tcp_worker_new(net_t *net, unsigned worker_idx, tcp_worker_t **out, char *err, size_t errlen)
{
	tcp_worker_t *w = xcalloc(1, sizeof(*w));
	w->net = net;
	w->idx = worker_idx;
	w->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (w->loop == NULL) {
		snprintf(err, errlen, "cannot create a TCP event loop");
		free(w);
		return STEER_ENOMEM;
	}
	/* Distinct from every UDP worker's (worker << 16 | address index). */
	w->qctx = auth_qctx_new(UINT64_C(1) << 48 | worker_idx);
	ev_async_init(&w->wake, on_wake);
	ev_async_start(w->loop, &w->wake);
	cds_wfcq_init(&w->fwd_head, &w->fwd_tail);
	ev_async_init(&w->fwd_wake, on_fwd_answers);
	w->fwd_wake.data = w;
	ev_async_start(w->loop, &w->fwd_wake);
	ev_init(&w->accept_pause, on_accept_resume);
	w->accept_pause.data = w;
	ev_timer_init(&w->heartbeat, on_heartbeat, TCP_HEARTBEAT_MS / 1000.0,
	              TCP_HEARTBEAT_MS / 1000.0);
	w->heartbeat.data = w;
	ev_timer_start(w->loop, &w->heartbeat);
	w->listeners = xcalloc(net->n_listen, sizeof(*w->listeners));
	*out = w;
	for (size_t a = 0; a < net->n_listen; a++) {
		int ret = listener_open(w, &net->listen[a], err, errlen);
		if (ret != 0)
			return ret;
	}
	return 0;
}

void tcp_worker_set_tap(tcp_worker_t *w, tap_thread_t *tap)
{
	w->tap = tap;
}

int tcp_worker_start(tcp_worker_t *w)
{
	net_heartbeat(&w->alive_ms);
	int ret = pthread_create(&w->thread, NULL, tcp_worker_main, w);
	if (ret != 0)
		return -ret;
	w->started = true;
	char name[16];
	tcp_worker_name(w, name, sizeof(name));
	pthread_setname_np(w->thread, name);
	return 0;
}

void tcp_worker_stop(tcp_worker_t *w)
{
	if (!w->started)
		return;
	ev_async_send(w->loop, &w->wake);
	pthread_join(w->thread, NULL);
	w->started = false;
}

auth_qctx_t *tcp_worker_qctx(const tcp_worker_t *w)
{
	return w->qctx;
}

void tcp_worker_stats(const tcp_worker_t *w, net_stats_t *sum)
{
	steer_counters_add((steer_counter_t *)&sum->net, (const steer_counter_t *)&w->counters,
	                   STEER_COUNTERS_IN(net_counters_t));
	auth_qctx_sum(w->qctx, &sum->auth, &sum->gslb);
	steer_counters_add((steer_counter_t *)&sum->fwd, (const steer_counter_t *)&w->fwd_ctr,
	                   STEER_COUNTERS_IN(fwd_serve_counters_t));
}

uint64_t tcp_worker_silence_ms(const tcp_worker_t *w, uint64_t now_ms)
{
	if (!w->started)
		return 0;
	uint64_t alive = atomic_load_explicit(&w->alive_ms, memory_order_relaxed);
	return now_ms > alive ? now_ms - alive : 0;
}

void tcp_worker_name(const tcp_worker_t *w, char *buf, size_t size)
{
	snprintf(buf, size, "steer-tcp%u", w->idx);
}

void tcp_worker_free(tcp_worker_t *w)
{
	if (w == NULL)
		return;
	tcp_worker_stop(w);
	conn_close_all(w);
	for (size_t i = 0; i < w->n_listeners; i++) {
		ev_io_stop(w->loop, &w->listeners[i].io);
		close(w->listeners[i].fd);
	}
	/* The engine is stopped before the transports are freed: no answer can arrive now. */
	struct cds_wfcq_node *node;
	while ((node = __cds_wfcq_dequeue_blocking(&w->fwd_head, &w->fwd_tail)) != NULL)
		free(caa_container_of(node, tcp_fwd_answer_t, node));
	while (w->zombies.head != NULL) {
		tcp_conn_t *c = w->zombies.head;
		list_remove(c);
		free(c);
	}
	cds_wfcq_destroy(&w->fwd_head, &w->fwd_tail);
	while (w->free_conns != NULL) {
		tcp_conn_t *c = w->free_conns;
		w->free_conns = c->next;
		free(c);
	}
	ev_loop_destroy(w->loop);
	auth_qctx_free(w->qctx);
	free(w->listeners);
	free(w);
}
