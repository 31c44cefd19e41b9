/*
 * The transfer thread. Each secondary zone has a timer on the thread's loop; when it fires
 * (or a NOTIFY, `steerctl zone-refresh` or a new zone wakes the loop) the zone is refreshed:
 * the SOA is asked of each primary in turn (UDP, TCP when truncated) and, when the primary's
 * serial is newer (RFC 1982), the zone is transferred by AXFR over TCP into a receiver that
 * enforces the limits, written whole to its file (temporary file, fsync, rename) and loaded
 * from it. Only a version that loads is handed over, so a transfer applies entirely or not at
 * all; the control thread then builds a new zone set and publishes it through the usual RCU
 * swap. Expiry is a shared atomic deadline that query threads compare with the clock.
 *
 * The state shared with the control thread (configuration, current version, status) is under
 * one mutex that query threads never take; they only read the atomics.
 */
#include "xfr/xfr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ev.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/file.h"
#include "base/log.h"
#include "dns/dname.h"
#include "dns/wire.h"
#include "xfr/msg.h"

/* Timeouts of one exchange with a primary; short so that shutdown is never held long. */
#define SOA_TIMEOUT_MS 2000
#define TCP_TIMEOUT_MS 10000
#define POLL_SLICE_MS  200
#define NOTIFY_TRIES   5
#define NOTIFY_RETRY_S 2.0
#define NOTIFY_MSG_MAX 1024

typedef struct xfr_zone {
	struct xfr *xfr;
	uint8_t apex[DNS_DNAME_MAXLEN];
	size_t apex_len;
	char *name;
	/* Under xfr->lock: */
	char *file;
	xfr_remote_t *primaries; /* keys not copied: TSIG is resolved by name at use */
	size_t n_primaries;
	bool ixfr;
	unsigned refresh_min_ms, refresh_max_ms;
	uint64_t max_transfer_size, max_records;
	zone_t *current;
	xfr_zone_status_t status;
	bool synced, removed;
	/* Shared with query threads: */
	_Atomic int64_t expire_at;
	atomic_bool want_refresh, want_axfr;
	/* Transfer thread only: */
	ev_timer timer;
	bool armed;
	bool expired_logged;
} xfr_zone_t;

/* An immutable snapshot of the zones, for lock-free NOTIFY lookups. */
typedef struct {
	size_t n;
	xfr_zone_t *z[];
} zone_list_t;

typedef struct notify_job {
	struct notify_job *next;
	struct xfr *xfr;
	char zone_name[DNAME_STR_MAXLEN];
	steer_sockaddr_t addr, source;
	uint8_t msg[NOTIFY_MSG_MAX];
	size_t len;
	uint16_t id;
	int fd;
	unsigned tries;
	ev_io io;
	ev_timer timer;
} notify_job_t;

struct xfr {
	pthread_mutex_t lock;
	xfr_zone_t **zones; /* control thread adds; never shrinks until xfr_free */
	size_t n_zones;
	_Atomic(zone_list_t *) list;
	zone_list_t **old_lists;
	size_t n_old;
	notify_job_t *queued; /* under lock: NOTIFYs for the thread to start */
	notify_job_t *jobs;   /* transfer thread: running NOTIFYs */
	struct ev_loop *loop;
	ev_async wake;
	pthread_t thread;
	atomic_bool running, stop;
	void (*on_update)(void *arg);
	void *arg;
	atomic_uint_fast64_t transfers_ok, transfers_failed, notify_received, notify_sent,
	    notify_failed;
};

/* snprintf() for messages that may be cut short. */
STEER_PRINTF(3, 4) static void set_err(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static uint16_t random_id(void)
{
	uint16_t id = 0;
	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		id = (uint16_t)(rand() ^ time(NULL));
	return id;
}

static uint32_t clamp_ms(uint32_t seconds, unsigned lo, unsigned hi)
{
	uint64_t ms = (uint64_t)seconds * 1000;
	if (ms < lo)
		ms = lo;
	if (ms > hi)
		ms = hi;
	return (uint32_t)ms;
}

/* ---- TSIG ------------------------------------------------------------------------------------ */

bool xfr_tsig_key(const char *name, const char *algorithm, const uint8_t *secret, size_t len,
                  dns_tsig_key_t *out)
{
	memset(out, 0, sizeof(*out));
	int n = dname_from_str(name, out->name);
	if (n < 0 || len > DNS_TSIG_SECRET_MAX || !dns_tsig_alg_from_str(algorithm, &out->alg))
		return false;
	dname_lower(out->name);
	out->name_len = (uint8_t)n;
	memcpy(out->secret, secret, len);
	out->secret_len = (uint16_t)len;
	return true;
}

/* Sign the request @p q (@p len bytes, room for @p cap) when @p r has a key; the new length. */
static size_t tsig_sign(const xfr_remote_t *r, dns_tsig_ctx_t *ctx, uint8_t *q, size_t len,
                        size_t cap)
{
	if (r->key == NULL)
		return len;
	return dns_tsig_sign_request(&r->tsig, ctx, q, len, cap, (uint64_t)time(NULL));
}

/* Verify one answer of a signed exchange; 0 when good or unsigned by configuration. */
static int tsig_verify(const xfr_remote_t *r, dns_tsig_ctx_t *ctx, const uint8_t *msg, size_t len,
                       bool last)
{
	if (r->key == NULL)
		return 0;
	return dns_tsig_verify_response(ctx, msg, len, last, (uint64_t)time(NULL));
}

/* ---- the zone list ------------------------------------------------------------------------ */

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);

static void free_remotes(xfr_remote_t *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].key);
	free(r);
}

xfr_t *xfr_new(void (*on_update)(void *arg), void *arg)
{
	xfr_t *x = xcalloc(1, sizeof(*x));
	pthread_mutex_init(&x->lock, NULL);
	x->on_update = on_update;
	x->arg = arg;
	zone_list_t *l = xcalloc(1, sizeof(*l));
	atomic_init(&x->list, l);
	x->loop = ev_loop_new(EVFLAG_AUTO);
	STEER_ASSERT(x->loop != NULL);
	ev_async_init(&x->wake, NULL);
	return x;
}

static xfr_zone_t *find_zone(xfr_t *x, const uint8_t *apex)
{
	for (size_t i = 0; i < x->n_zones; i++) {
		if (dname_equal(x->zones[i]->apex, apex))
			return x->zones[i];
	}
	return NULL;
}

static void publish_list(xfr_t *x)
{
	zone_list_t *l = xcalloc(1, sizeof(*l) + x->n_zones * sizeof(l->z[0]));
	l->n = x->n_zones;
	memcpy(l->z, x->zones, x->n_zones * sizeof(l->z[0]));
	zone_list_t *old = atomic_exchange_explicit(&x->list, l, memory_order_acq_rel);
	/* A query thread may still scan the old list: it is freed with the module. */
	x->old_lists = xrealloc(x->old_lists, (x->n_old + 1) * sizeof(*x->old_lists));
	x->old_lists[x->n_old++] = old;
}

/* The expiry of a version read from disk counts from when the file was written. */
static void load_from_disk(xfr_zone_t *z)
{
	struct stat st;
	if (stat(z->file, &st) != 0)
		return;
	char err[1024] = "";
	zone_t *zone = NULL;
	int ret = zone_load(z->name, z->file, &zone, err, sizeof(err));
	if (ret != 0) {
		log_warn("secondary zone %s: cannot load %s, transferring it again: %s", z->name,
		         z->file, err[0] ? err : steer_strerror(ret));
		return;
	}
	xfr_soa_t soa = {0};
	uint16_t rdlen = (uint16_t)(zone->soa->rdata[0] << 8 | zone->soa->rdata[1]);
	(void)xfr_soa_parse(zone->soa->rdata + 2, rdlen, &soa);
	z->current = zone;
	z->status.has_zone = true;
	z->status.serial = zone->serial;
	z->status.expire_at = st.st_mtime + (time_t)soa.expire;
	atomic_store(&z->expire_at, (int64_t)z->status.expire_at);
	log_info("secondary zone %s: serial %u from %s, expires in %lds unless refreshed", z->name,
	         zone->serial, z->file, (long)(z->status.expire_at - time(NULL)));
}

int xfr_zone_sync(xfr_t *x, const xfr_zone_conf_t *c)
{
	uint8_t apex[DNS_DNAME_MAXLEN];
	if (dname_from_str(c->name, apex) < 0)
		return STEER_EINVAL;
	dname_lower(apex);
	pthread_mutex_lock(&x->lock);
	xfr_zone_t *z = find_zone(x, apex);
	bool fresh = z == NULL;
	if (fresh) {
		z = xcalloc(1, sizeof(*z));
		z->xfr = x;
		z->apex_len = dname_len(apex);
		memcpy(z->apex, apex, z->apex_len);
		char buf[DNAME_STR_MAXLEN];
		z->name = xstrdup(dname_to_str(apex, buf, sizeof(buf)));
		atomic_init(&z->expire_at, 0);
		atomic_init(&z->want_refresh, false);
		atomic_init(&z->want_axfr, false);
		ev_timer_init(&z->timer, on_timer, 0., 0.);
		z->timer.data = z;
		x->zones = xrealloc(x->zones, (x->n_zones + 1) * sizeof(*x->zones));
		x->zones[x->n_zones++] = z;
	}
	free(z->file);
	z->file = xstrdup(c->file);
	free_remotes(z->primaries, z->n_primaries);
	z->primaries = xcalloc(c->n_primaries ? c->n_primaries : 1, sizeof(*z->primaries));
	for (size_t i = 0; i < c->n_primaries; i++) {
		z->primaries[i] = c->primaries[i];
		z->primaries[i].key = c->primaries[i].key ? xstrdup(c->primaries[i].key) : NULL;
	}
	z->n_primaries = c->n_primaries;
	z->ixfr = c->ixfr;
	z->refresh_min_ms = c->refresh_min_ms;
	z->refresh_max_ms = c->refresh_max_ms;
	z->max_transfer_size = c->max_transfer_size;
	z->max_records = c->max_records;
	z->synced = true;
	bool was_removed = z->removed;
	z->removed = false;
	if (z->current == NULL)
		load_from_disk(z);
	if (fresh)
		publish_list(x);
	pthread_mutex_unlock(&x->lock);
	if (was_removed)
		log_info("secondary zone %s: configured again", z->name);
	return 0;
}

void xfr_sync_done(xfr_t *x)
{
	pthread_mutex_lock(&x->lock);
	for (size_t i = 0; i < x->n_zones; i++) {
		xfr_zone_t *z = x->zones[i];
		if (!z->synced && !z->removed) {
			z->removed = true;
			/* Its data goes with it: a re-added zone starts from its file. */
			zone_unref(z->current);
			z->current = NULL;
			atomic_store(&z->expire_at, 0);
			z->status = (xfr_zone_status_t){0};
		}
		z->synced = false;
	}
	pthread_mutex_unlock(&x->lock);
	if (atomic_load(&x->running))
		ev_async_send(x->loop, &x->wake);
}

zone_t *xfr_zone_current(xfr_t *x, const uint8_t *apex, const _Atomic int64_t **expire_at)
{
	pthread_mutex_lock(&x->lock);
	xfr_zone_t *z = find_zone(x, apex);
	zone_t *zone = z != NULL && !z->removed ? z->current : NULL;
	if (zone != NULL)
		zone_ref(zone);
	*expire_at = z != NULL ? &z->expire_at : NULL;
	pthread_mutex_unlock(&x->lock);
	return zone;
}

void xfr_notify_received(xfr_t *x, const uint8_t *apex)
{
	zone_list_t *l = atomic_load_explicit(&x->list, memory_order_acquire);
	for (size_t i = 0; i < l->n; i++) {
		if (dname_equal(l->z[i]->apex, apex)) {
			atomic_fetch_add_explicit(&x->notify_received, 1, memory_order_relaxed);
			atomic_store(&l->z[i]->want_refresh, true);
			if (atomic_load(&x->running))
				ev_async_send(x->loop, &x->wake);
			return;
		}
	}
}

int xfr_refresh(xfr_t *x, const uint8_t *apex, bool axfr)
{
	zone_list_t *l = atomic_load_explicit(&x->list, memory_order_acquire);
	for (size_t i = 0; i < l->n; i++) {
		xfr_zone_t *z = l->z[i];
		if (dname_equal(z->apex, apex)) {
			if (axfr)
				atomic_store(&z->want_axfr, true);
			atomic_store(&z->want_refresh, true);
			if (atomic_load(&x->running))
				ev_async_send(x->loop, &x->wake);
			return 0;
		}
	}
	return STEER_ENOENT;
}

bool xfr_zone_status(xfr_t *x, const uint8_t *apex, xfr_zone_status_t *out)
{
	pthread_mutex_lock(&x->lock);
	xfr_zone_t *z = find_zone(x, apex);
	bool ok = z != NULL && !z->removed;
	if (ok)
		*out = z->status;
	pthread_mutex_unlock(&x->lock);
	return ok;
}

void xfr_counters(xfr_t *x, xfr_counters_t *out)
{
	out->transfers_ok = atomic_load(&x->transfers_ok);
	out->transfers_failed = atomic_load(&x->transfers_failed);
	out->notify_received = atomic_load(&x->notify_received);
	out->notify_sent = atomic_load(&x->notify_sent);
	out->notify_failed = atomic_load(&x->notify_failed);
}

/* ---- blocking I/O on the transfer thread ---------------------------------------------------- */

/* Wait for @p events on @p fd up to @p ms, in slices so that a stop is seen. 1 ready, 0
 * timeout or stop, -1 error. */
static int wait_fd(xfr_t *x, int fd, short events, int ms)
{
	while (ms > 0 && !atomic_load(&x->stop)) {
		struct pollfd p = {.fd = fd, .events = events};
		int slice = ms < POLL_SLICE_MS ? ms : POLL_SLICE_MS;
		int n = poll(&p, 1, slice);
		if (n > 0)
			return (p.revents & (events | POLLHUP | POLLERR)) ? 1 : -1;
		if (n < 0 && errno != EINTR)
			return -1;
		ms -= slice;
	}
	return 0;
}

static int open_socket(const xfr_remote_t *r, int type)
{
	int fd = socket(r->addr.sa.sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (r->source.sa.sa_family != 0 &&
	    bind(fd, &r->source.sa, steer_sockaddr_len(&r->source)) != 0) {
		close(fd);
		return -1;
	}
	if (connect(fd, &r->addr.sa, steer_sockaddr_len(&r->addr)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static ssize_t udp_exchange(xfr_t *x, const xfr_remote_t *r, const uint8_t *q, size_t qlen,
                            uint8_t *resp, size_t cap, uint16_t id)
{
	int fd = open_socket(r, SOCK_DGRAM);
	if (fd < 0)
		return -1;
	ssize_t n = -1;
	if (send(fd, q, qlen, 0) == (ssize_t)qlen) {
		for (;;) {
			if (wait_fd(x, fd, POLLIN, SOA_TIMEOUT_MS) != 1)
				break;
			n = recv(fd, resp, cap, 0);
			if (n >= 2 && wire_read_u16(resp) == id)
				break;
			n = -1; /* a stray datagram: keep waiting */
		}
	}
	close(fd);
	return n;
}

static int tcp_open(xfr_t *x, const xfr_remote_t *r)
{
	int fd = open_socket(r, SOCK_STREAM);
	if (fd < 0)
		return -1;
	int err = 0;
	socklen_t len = sizeof(err);
	if (wait_fd(x, fd, POLLOUT, TCP_TIMEOUT_MS) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int tcp_write_all(xfr_t *x, int fd, const uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(x, fd, POLLOUT, TCP_TIMEOUT_MS) != 1)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tcp_read_all(xfr_t *x, int fd, uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(x, fd, POLLIN, TCP_TIMEOUT_MS) != 1)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tcp_send_msg(xfr_t *x, int fd, const uint8_t *msg, size_t len)
{
	uint8_t hdr[2];
	wire_write_u16(hdr, (uint16_t)len);
	return tcp_write_all(x, fd, hdr, 2) == 0 ? tcp_write_all(x, fd, msg, len) : -1;
}

/* One message into @p buf (65535 bytes); its length or -1. */
static ssize_t tcp_recv_msg(xfr_t *x, int fd, uint8_t *buf)
{
	uint8_t hdr[2];
	if (tcp_read_all(x, fd, hdr, 2) != 0)
		return -1;
	uint16_t len = wire_read_u16(hdr);
	if (tcp_read_all(x, fd, buf, len) != 0)
		return -1;
	return len;
}

/* ---- refresh -------------------------------------------------------------------------------- */

typedef struct {
	char name[DNAME_STR_MAXLEN];
	uint8_t apex[DNS_DNAME_MAXLEN];
	char file[4096];
	xfr_remote_t primaries[64];
	char keys[64][DNAME_STR_MAXLEN]; /* the key names, which the zone may free meanwhile */
	size_t n_primaries;
	unsigned rmin, rmax;
	uint64_t max_size, max_records;
} refresh_conf_t;

static int ask_soa(xfr_t *x, const refresh_conf_t *c, const xfr_remote_t *r, xfr_soa_t *soa,
                   char *err, size_t errlen)
{
	uint8_t q[512], *resp = xmalloc(65535);
	uint16_t id = random_id();
	dns_tsig_ctx_t signed_q = {0}, ctx;
	size_t qlen = xfr_query_write(q, sizeof(q), id, c->apex, DNS_TYPE_SOA, false, 0, NULL, 0);
	qlen = tsig_sign(r, &signed_q, q, qlen, sizeof(q));
	int ret = -1;
	ssize_t n = qlen ? udp_exchange(x, r, q, qlen, resp, 65535, id) : -1;
	if (n < 0) {
		set_err(err, errlen, "no answer to the SOA query");
		goto out;
	}
	ctx = signed_q;
	if (tsig_verify(r, &ctx, resp, (size_t)n, true) != 0) {
		set_err(err, errlen, "the SOA answer fails TSIG verification");
		goto out;
	}
	ret = xfr_soa_reply(resp, (size_t)n, id, c->apex, soa, err, errlen);
	if (ret != 1)
		goto out;
	/* Truncated: the same question over TCP. */
	ret = -1;
	int fd = tcp_open(x, r);
	if (fd < 0) {
		set_err(err, errlen, "cannot connect over TCP for the SOA");
		goto out;
	}
	ctx = signed_q;
	if (tcp_send_msg(x, fd, q, qlen) != 0 || (n = tcp_recv_msg(x, fd, resp)) <= 0)
		set_err(err, errlen, "no answer to the SOA query over TCP");
	else if (tsig_verify(r, &ctx, resp, (size_t)n, true) != 0)
		set_err(err, errlen, "the SOA answer fails TSIG verification");
	else
		ret = xfr_soa_reply(resp, (size_t)n, id, c->apex, soa, err, errlen) == 0 ? 0 : -1;
	close(fd);
out:
	free(resp);
	return ret;
}

static int fill_zone_file(FILE *f, void *ctx)
{
	return xfr_rx_write(ctx, f);
}

/* Send @p q to @p r over TCP and receive the whole answer into @p rx. */
static int receive(xfr_t *x, const xfr_remote_t *r, uint8_t *q, size_t qlen, size_t qcap,
                   xfr_rx_t *rx, char *err, size_t errlen)
{
	uint8_t *buf = xmalloc(65535);
	int ret = -1;
	dns_tsig_ctx_t ctx = {0};
	int fd = -1;
	qlen = tsig_sign(r, &ctx, q, qlen, qcap);
	if (qlen == 0) {
		set_err(err, errlen, "cannot sign the query");
		goto out;
	}
	fd = tcp_open(x, r);
	if (fd < 0) {
		set_err(err, errlen, "cannot connect over TCP");
		goto out;
	}
	if (tcp_send_msg(x, fd, q, qlen) != 0) {
		set_err(err, errlen, "cannot send the query");
		goto out;
	}
	int st = 0;
	while (st == 0) {
		ssize_t n = tcp_recv_msg(x, fd, buf);
		if (n < 0) {
			set_err(err, errlen,
			        "the transfer ended before the closing SOA (%u messages)",
			        rx->messages);
			goto out;
		}
		st = xfr_rx_feed(rx, buf, (size_t)n);
		/* Received, not yet used: the transfer is dropped unless every signature holds. */
		if (st >= 0 && tsig_verify(r, &ctx, buf, (size_t)n, st == 1) != 0) {
			set_err(err, errlen, "message %u fails TSIG verification", rx->messages);
			goto out;
		}
	}
	if (st < 0) {
		set_err(err, errlen, "transfer aborted: %s", rx->err);
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/* Write the whole zone of @p rx to the zone's file and load it into @p out. */
static int apply(const refresh_conf_t *c, const xfr_rx_t *rx, zone_t **out, char *err,
                 size_t errlen)
{
	int wr = steer_file_replace(c->file, 0644, fill_zone_file, (void *)rx);
	if (wr == -ENOENT) {
		/* The storage folder on a fresh system: create it (not its parents). */
		char dir[sizeof(c->file)];
		snprintf(dir, sizeof(dir), "%s", c->file);
		char *slash = strrchr(dir, '/');
		if (slash != NULL && slash != dir) {
			*slash = '\0';
			if (mkdir(dir, 0750) == 0)
				log_info("created %s for secondary zones", dir);
			wr = steer_file_replace(c->file, 0644, fill_zone_file, (void *)rx);
		}
	}
	if (wr != 0) {
		set_err(err, errlen, "cannot write %s: %s", c->file, steer_strerror(wr));
		return -1;
	}
	char msg[1024] = "";
	int lr = zone_load(c->name, c->file, out, msg, sizeof(msg));
	if (lr != 0) {
		set_err(err, errlen, "the transferred zone does not load: %s",
		        msg[0] ? msg : steer_strerror(lr));
		return -1;
	}
	return 0;
}

/* AXFR from @p r into a loaded zone in @p out. */
static int transfer(xfr_t *x, const refresh_conf_t *c, const xfr_remote_t *r, zone_t **out,
                    char *err, size_t errlen)
{
	uint8_t q[512];
	uint16_t id = random_id();
	size_t qlen = xfr_query_write(q, sizeof(q), id, c->apex, DNS_TYPE_AXFR, false, 0, NULL, 0);
	xfr_rx_t rx;
	xfr_rx_init(&rx, c->apex, id, c->max_size, c->max_records);
	int ret = receive(x, r, q, qlen, sizeof(q), &rx, err, errlen);
	if (ret == 0)
		ret = apply(c, &rx, out, err, errlen);
	xfr_rx_free(&rx);
	return ret;
}

/*
 * IXFR from @p r against our version @p cur (RFC 1995): 1 when it is current, 0 with the new
 * version in @p out (*@p diffs: it came as diffs, not as a whole zone), -1 when the caller
 * must fall back to AXFR (refused, broken, or diffs that do not apply).
 */
static int transfer_ixfr(xfr_t *x, const refresh_conf_t *c, const xfr_remote_t *r,
                         const zone_t *cur, zone_t **out, bool *diffs, char *err, size_t errlen)
{
	uint8_t q[1024];
	uint16_t id = random_id();
	const zone_rrset_t *soa = cur->soa;
	uint16_t soa_len = (uint16_t)(soa->rdata[0] << 8 | soa->rdata[1]);
	size_t qlen =
	    xfr_ixfr_query_write(q, sizeof(q), id, c->apex, soa->ttl, soa->rdata + 2, soa_len);
	if (qlen == 0) {
		set_err(err, errlen, "the SOA does not fit an IXFR query");
		return -1;
	}
	xfr_rx_t rx, whole;
	xfr_rx_init_ixfr(&rx, c->apex, id, c->max_size, c->max_records, cur->serial);
	int ret = receive(x, r, q, qlen, sizeof(q), &rx, err, errlen);
	*diffs = rx.mode == XFR_RX_IXFR;
	if (ret == 0 && rx.mode == XFR_RX_UPTODATE) {
		ret = 1;
	} else if (ret == 0 && rx.mode == XFR_RX_IXFR) {
		ret = xfr_rx_apply(&rx, cur, &whole);
		if (ret != 0)
			set_err(err, errlen, "%s", whole.err);
		else
			ret = apply(c, &whole, out, err, errlen);
		xfr_rx_free(&whole);
	} else if (ret == 0) {
		ret = apply(c, &rx, out, err, errlen);
	}
	xfr_rx_free(&rx);
	return ret;
}

static void arm(xfr_zone_t *z, double seconds)
{
	ev_timer_stop(z->xfr->loop, &z->timer);
	ev_timer_set(&z->timer, seconds, 0.);
	ev_timer_start(z->xfr->loop, &z->timer);
	z->armed = true;
}

static void refresh(xfr_zone_t *z, bool force_axfr)
{
	xfr_t *x = z->xfr;
	refresh_conf_t *c = xcalloc(1, sizeof(*c));
	pthread_mutex_lock(&x->lock);
	if (z->removed) {
		pthread_mutex_unlock(&x->lock);
		free(c);
		return;
	}
	snprintf(c->name, sizeof(c->name), "%s", z->name);
	memcpy(c->apex, z->apex, z->apex_len);
	snprintf(c->file, sizeof(c->file), "%s", z->file);
	c->n_primaries = z->n_primaries < 64 ? z->n_primaries : 64;
	for (size_t i = 0; i < c->n_primaries; i++) {
		c->primaries[i] = z->primaries[i];
		/* only whether there is one: the name is not needed until TSIG signs here */
		c->primaries[i].key = NULL;
		if (z->primaries[i].key != NULL) {
			snprintf(c->keys[i], sizeof(c->keys[i]), "%s", z->primaries[i].key);
			c->primaries[i].key = c->keys[i];
		}
	}
	c->rmin = z->refresh_min_ms;
	c->rmax = z->refresh_max_ms;
	c->max_size = z->max_transfer_size;
	c->max_records = z->max_records;
	bool have = z->current != NULL;
	uint32_t serial = have ? z->current->serial : 0;
	bool ixfr = z->ixfr && have && !force_axfr;
	zone_t *cur = z->current;
	if (cur != NULL)
		zone_ref(cur);
	pthread_mutex_unlock(&x->lock);
	const char *how = "AXFR";

	char err[192] = "", primary[64] = "";
	xfr_soa_t soa = {0};
	zone_t *fresh = NULL;
	bool ok = false;
	for (size_t i = 0; i < c->n_primaries && !ok && !atomic_load(&x->stop); i++) {
		const xfr_remote_t *r = &c->primaries[i];
		char e[160] = "";
		steer_sockaddr_str(&r->addr, primary, sizeof(primary));
		if (r->key != NULL && !r->tsig_ok) {
			/* Never fall back to an unsigned transfer when a key is configured. */
			set_err(err, sizeof(err),
			        "%s: key '%s' cannot sign: unknown key or algorithm", primary,
			        r->key);
			continue;
		}
		if (ask_soa(x, c, r, &soa, e, sizeof(e)) != 0) {
			set_err(err, sizeof(err), "%s: %s", primary, e);
			continue;
		}
		if (have && !force_axfr && !xfr_serial_gt(soa.serial, serial)) {
			ok = true; /* up to date (or the primary is behind: keep ours) */
			break;
		}
		if (ixfr) {
			bool diffs = false;
			int ir = transfer_ixfr(x, c, r, cur, &fresh, &diffs, e, sizeof(e));
			if (ir == 1) {
				ok = true; /* the primary says our version is current */
				break;
			}
			if (ir == 0) {
				how = diffs ? "IXFR" : "IXFR (answered with the whole zone)";
				ok = true;
				break;
			}
			log_info("secondary zone %s: IXFR from %s failed (%s), trying AXFR",
			         c->name, primary, e);
		}
		if (transfer(x, c, r, &fresh, e, sizeof(e)) != 0) {
			set_err(err, sizeof(err), "%s: %s", primary, e);
			atomic_fetch_add(&x->transfers_failed, 1);
			pthread_mutex_lock(&x->lock);
			z->status.transfers_failed++;
			pthread_mutex_unlock(&x->lock);
			continue;
		}
		ok = true;
	}
	time_t now = time(NULL);
	pthread_mutex_lock(&x->lock);
	bool updated = fresh != NULL && !z->removed;
	if (updated) {
		zone_t *old = z->current;
		z->current = fresh;
		fresh = NULL;
		zone_unref(old);
		z->status.has_zone = true;
		z->status.serial = z->current->serial;
		z->status.transfers_ok++;
		atomic_fetch_add(&x->transfers_ok, 1);
		z->status.ixfr_ok += how[0] == 'I' && how[4] == '\0';
		log_info("secondary zone %s: transferred serial %u (%zu records) from %s by %s",
		         z->name, z->current->serial, z->current->n_records, primary, how);
	}
	if (ok) {
		z->status.last_refresh = now;
		z->status.expire_at = now + (time_t)soa.expire;
		set_err(z->status.primary, sizeof(z->status.primary), "%s", primary);
		z->status.last_error[0] = '\0';
		atomic_store(&z->expire_at, (int64_t)z->status.expire_at);
		z->expired_logged = false;
	} else {
		set_err(z->status.last_error, sizeof(z->status.last_error), "%s",
		        err[0] ? err : "no primary configured");
		log_warn("secondary zone %s: refresh failed: %s", z->name, z->status.last_error);
		if (z->current != NULL && z->status.expire_at <= now && !z->expired_logged) {
			log_err(
			    "secondary zone %s: expired (no good refresh within the SOA's expire "
			    "time), answered SERVFAIL until a transfer succeeds",
			    z->name);
			z->expired_logged = true;
		}
	}
	/* The timers of the version we hold (or the primary's when none). */
	xfr_soa_t t = soa;
	if (z->current != NULL) {
		const zone_rrset_t *s = z->current->soa;
		(void)xfr_soa_parse(s->rdata + 2, (size_t)(s->rdata[0] << 8 | s->rdata[1]), &t);
	}
	uint32_t next_ms =
	    ok ? clamp_ms(t.refresh, c->rmin, c->rmax)
	       : (z->current != NULL ? clamp_ms(t.retry, c->rmin, c->rmax) : c->rmin);
	z->status.next_refresh = now + (time_t)((next_ms + 999) / 1000);
	bool removed = z->removed;
	pthread_mutex_unlock(&x->lock);
	zone_unref(fresh);
	zone_unref(cur);
	free(c);
	if (!removed)
		arm(z, next_ms / 1000.0);
	if (updated && x->on_update != NULL)
		x->on_update(x->arg);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	xfr_zone_t *z = w->data;
	z->armed = false;
	refresh(z, atomic_exchange(&z->want_axfr, false));
}

/* ---- NOTIFY out ----------------------------------------------------------------------------- */

static void job_free(notify_job_t *j)
{
	xfr_t *x = j->xfr;
	ev_io_stop(x->loop, &j->io);
	ev_timer_stop(x->loop, &j->timer);
	if (j->fd >= 0)
		close(j->fd);
	for (notify_job_t **p = &x->jobs; *p; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			break;
		}
	}
	free(j);
}

static void job_send(notify_job_t *j)
{
	char addr[64];
	steer_sockaddr_str(&j->addr, addr, sizeof(addr));
	if (j->tries++ == NOTIFY_TRIES) {
		log_warn("zone %s: NOTIFY to %s not answered after %d tries", j->zone_name, addr,
		         NOTIFY_TRIES);
		atomic_fetch_add(&j->xfr->notify_failed, 1);
		job_free(j);
		return;
	}
	if (send(j->fd, j->msg, j->len, 0) != (ssize_t)j->len)
		log_debug("zone %s: NOTIFY to %s: %s", j->zone_name, addr, steer_strerror(-errno));
	ev_timer_set(&j->timer, NOTIFY_RETRY_S, 0.);
	ev_timer_start(j->xfr->loop, &j->timer);
}

static void on_job_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	job_send(w->data);
}

static void on_job_reply(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	notify_job_t *j = w->data;
	uint8_t buf[NOTIFY_MSG_MAX], rcode = 0;
	ssize_t n = recv(j->fd, buf, sizeof(buf), 0);
	if (n < 0 || !xfr_notify_reply(buf, (size_t)n, j->id, &rcode))
		return;
	char addr[64];
	steer_sockaddr_str(&j->addr, addr, sizeof(addr));
	if (rcode == DNS_RCODE_NOERROR) {
		log_info("zone %s: NOTIFY to %s answered", j->zone_name, addr);
		atomic_fetch_add(&j->xfr->notify_sent, 1);
	} else {
		log_warn("zone %s: NOTIFY to %s answered rcode %u", j->zone_name, addr, rcode);
		atomic_fetch_add(&j->xfr->notify_failed, 1);
	}
	job_free(j);
}

static void job_start(xfr_t *x, notify_job_t *j)
{
	xfr_remote_t r = {.addr = j->addr, .source = j->source};
	j->fd = open_socket(&r, SOCK_DGRAM);
	j->next = x->jobs;
	x->jobs = j;
	if (j->fd < 0) {
		log_warn("zone %s: cannot send NOTIFY: %s", j->zone_name, steer_strerror(-errno));
		atomic_fetch_add(&x->notify_failed, 1);
		job_free(j);
		return;
	}
	ev_io_init(&j->io, on_job_reply, j->fd, EV_READ);
	j->io.data = j;
	ev_io_start(x->loop, &j->io);
	ev_timer_init(&j->timer, on_job_timer, 0., 0.);
	j->timer.data = j;
	job_send(j);
}

void xfr_notify_send(xfr_t *x, zone_t *zone, const xfr_remote_t *targets, size_t n)
{
	const zone_rrset_t *soa = zone->soa;
	uint16_t rdlen = (uint16_t)(soa->rdata[0] << 8 | soa->rdata[1]);
	for (size_t i = 0; i < n; i++) {
		if (targets[i].key != NULL && !targets[i].tsig_ok) {
			log_warn("zone %s: NOTIFY not sent: key '%s' cannot sign (unknown key or "
			         "algorithm)",
			         zone->name, targets[i].key);
			continue;
		}
		notify_job_t *j = xcalloc(1, sizeof(*j));
		j->xfr = x;
		j->fd = -1;
		snprintf(j->zone_name, sizeof(j->zone_name), "%s", zone->name);
		j->addr = targets[i].addr;
		j->source = targets[i].source;
		j->id = random_id();
		j->len = xfr_query_write(j->msg, sizeof(j->msg), j->id, zone->apex, DNS_TYPE_SOA,
		                         true, soa->ttl, soa->rdata + 2, rdlen);
		dns_tsig_ctx_t ctx = {0};
		if (j->len != 0)
			j->len = tsig_sign(&targets[i], &ctx, j->msg, j->len, sizeof(j->msg));
		if (j->len == 0) {
			free(j);
			continue;
		}
		pthread_mutex_lock(&x->lock);
		j->next = x->queued;
		x->queued = j;
		pthread_mutex_unlock(&x->lock);
	}
	if (atomic_load(&x->running))
		ev_async_send(x->loop, &x->wake);
}

/* ---- the thread ----------------------------------------------------------------------------- */

static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)revents;
	xfr_t *x = w->data;
	if (atomic_load(&x->stop)) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	pthread_mutex_lock(&x->lock);
	notify_job_t *q = x->queued;
	x->queued = NULL;
	size_t n = x->n_zones;
	xfr_zone_t **zones = xmalloc((n ? n : 1) * sizeof(*zones));
	if (n > 0)
		memcpy(zones, x->zones, n * sizeof(*zones));
	bool *removed = xmalloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		removed[i] = zones[i]->removed;
	pthread_mutex_unlock(&x->lock);
	while (q != NULL) {
		notify_job_t *next = q->next;
		job_start(x, q);
		q = next;
	}
	for (size_t i = 0; i < n && !atomic_load(&x->stop); i++) {
		xfr_zone_t *z = zones[i];
		if (removed[i]) {
			ev_timer_stop(loop, &z->timer);
			z->armed = false;
			continue;
		}
		bool want = atomic_exchange(&z->want_refresh, false);
		if (!z->armed || want) {
			/* On this thread's next iteration, so one slow zone does not delay the
			 * wake-up of the others beyond their own refresh. */
			arm(z, 0.);
		}
	}
	free(zones);
	free(removed);
}

static void *thread_main(void *arg)
{
	xfr_t *x = arg;
	log_debug("transfer thread started");
	ev_run(x->loop, 0);
	return NULL;
}

int xfr_start(xfr_t *x)
{
	ev_async_init(&x->wake, on_wake);
	x->wake.data = x;
	ev_async_start(x->loop, &x->wake);
	atomic_store(&x->running, true);
	int ret = pthread_create(&x->thread, NULL, thread_main, x);
	if (ret != 0) {
		atomic_store(&x->running, false);
		return -ret;
	}
	ev_async_send(x->loop, &x->wake);
	return 0;
}

void xfr_free(xfr_t *x)
{
	if (x == NULL)
		return;
	if (atomic_load(&x->running)) {
		atomic_store(&x->stop, true);
		ev_async_send(x->loop, &x->wake);
		pthread_join(x->thread, NULL);
		atomic_store(&x->running, false);
	}
	while (x->jobs != NULL)
		job_free(x->jobs);
	while (x->queued != NULL) {
		notify_job_t *next = x->queued->next;
		free(x->queued);
		x->queued = next;
	}
	for (size_t i = 0; i < x->n_zones; i++) {
		xfr_zone_t *z = x->zones[i];
		ev_timer_stop(x->loop, &z->timer);
		zone_unref(z->current);
		free(z->name);
		free(z->file);
		free_remotes(z->primaries, z->n_primaries);
		free(z);
	}
	free(x->zones);
	for (size_t i = 0; i < x->n_old; i++)
		free(x->old_lists[i]);
	free(x->old_lists);
	free(atomic_load(&x->list));
	ev_async_stop(x->loop, &x->wake);
	ev_loop_destroy(x->loop);
	pthread_mutex_destroy(&x->lock);
	free(x);
}
