/*
 * loadgen: a batched DNS load generator for the side-by-side benchmark (bench/run.py).
 *
 * UDP mode: several connected, non-blocking sockets; queries leave in sendmmsg batches and
 * answers arrive in recvmmsg batches. A bounded window of queries is kept in flight, so the
 * number measured is the server's capacity, not how fast the kernel can drop packets; a query
 * unanswered after --timeout is counted lost and frees its window slot.
 * TCP mode: many connections, each pipelining up to --pipeline framed queries (RFC 7766).
 *
 * Sends fold runs of equal-length queries into one UDP GSO datagram train (UDP_SEGMENT): the
 * server still receives one datagram per query, but our cost per query drops by a third, which
 * is what keeps this generator ahead of a one-thread server on the same kernel.
 *
 * One thread on purpose: the benchmark pins this process to one CPU, and a single busy thread
 * with batched syscalls costs less per query than several threads sharing that CPU. Nothing is
 * allocated on the send/receive path; all buffers are made at start-up.
 *
 * Answers are validated minimally: QR set, the ID is one in flight on that socket or
 * connection, the question section is byte-identical to the one sent (servers must preserve
 * case), and the rcode is counted. No latency is measured: the output is throughput only.
 */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Segments per UDP GSO send: the kernel's UDP_MAX_SEGMENTS, 64 on older kernels (newer allow
 * more); a send above the limit fails with EINVAL. */
#define GSO_SEGS_MAX 64
/* Largest query we build: header, a 255-byte name, type, class and one OPT record, which may
 * carry an ECS option (4 + 4 + 16 bytes at most). */
#define QUERY_MAX 324
/* Longest ECS option: code, length, family, source and scope prefix, a full IPv6 address. */
#define ECS_OPT_MAX (4 + 24) /* an ECS option (4 + 4 + 16) or a COOKIE one (4 + 24) */
/* UDP answers larger than this are counted but cut; 4096 covers any EDNS size we advertise. */
#define UDP_RECV_MAX 4096
/* Per-connection TCP input buffer: one maximal frame plus room to keep reading behind it. */
#define TCP_IN_CAP (2 + 65535 + 16384)
/* DNS IDs are 16 bits; every UDP socket tracks each one so answers can arrive in any order. */
#define ID_SPACE 65536u
/* Option limits: the kernel caps recvmmsg/sendmmsg at 1024 messages, far above what helps. */
#define BATCH_MAX    256
#define SOCKETS_MAX  64
#define PIPELINE_MAX 1024
/* Queries reordered by length as a group for GSO; small enough that the mix stays uniform. */
#define SORT_CHUNK 1024

typedef struct {
	uint32_t off;  /* into the arena */
	uint16_t len;  /* whole message */
	uint16_t qend; /* end of the question section: answers must echo bytes [12, qend) */
} query_t;

typedef struct {
	uint8_t *arena;
	size_t arena_len, arena_cap;
	query_t *q;
	size_t n, cap;
} qset_t;

typedef struct {
	uint64_t sent, recv, lost, late, bad, tc, errors, reconnects;
	/* Time spent finding nothing to send or receive: a large share means we were waiting for
	 * the server; near zero means the load generator itself may have been the limit. */
	uint64_t idle_ns;
	uint64_t rcode[16];
} stats_t;

typedef struct {
	struct sockaddr_storage addr;
	socklen_t addr_len;
	const char *server;
	unsigned port;
	double duration, warmup;
	const char *queries_file;
	const char *ecs_file;
	const char *cookie; /* hex COOKIE option payload for every query, NULL = none */
	const char *qname, *qtype;
	unsigned window, sockets, batch, connections, pipeline;
	unsigned timeout_ms;
	unsigned edns; /* advertised UDP size, 0 = no OPT record */
	unsigned rate; /* UDP: queries per second at most, 0 = as fast as the window allows */
	bool rd;       /* set RD in every query (a forwarder answers RD=0 from cache only) */
	bool tcp, json, gso;
} opts_t;

typedef struct {
	int fd;
	uint16_t head;     /* next ID to use */
	uint16_t tail;     /* oldest ID that may still be in flight */
	uint32_t inflight; /* IDs in [tail, head) whose qidx is non-zero */
	size_t qpos;
	uint32_t *qidx;    /* per ID: query index + 1, 0 when the ID is free */
	uint32_t *sent_ms; /* per ID: coarse send time, for the loss timeout */
} udp_sock_t;

typedef struct {
	int fd;
	uint16_t seq;
	uint32_t inflight;
	uint32_t last_ms; /* last answer, or when the first query after idle was sent */
	size_t qpos;
	uint32_t *slot_q; /* per slot (ID & mask): query index + 1, 0 when free */
	uint16_t *slot_id;
	uint8_t *in;
	size_t in_len;
	uint8_t *out;
	size_t out_len, out_off;
	bool want_out; /* EPOLLOUT registered because a write was partial */
} tcp_conn_t;

/* The measured interval: counters, wall time and our own CPU time when it began and ended. */
typedef struct {
	stats_t base;
	double t0, t1;
	double cpu0, cpu1;
} measure_t;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("loadgen: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	if (p == NULL) {
		die("out of memory");
	}
	return p;
}

static void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (p == NULL) {
		die("out of memory");
	}
	return p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double now_sec(void)
{
	return (double)now_ns() / 1e9;
}

static double cpu_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void measure_begin(measure_t *m, const stats_t *st)
{
	m->base = *st;
	m->t0 = now_sec();
	m->cpu0 = cpu_sec();
}

static void measure_end(measure_t *m)
{
	m->t1 = now_sec();
	m->cpu1 = cpu_sec();
}

/* Coarse clock: a vDSO read of a jiffy-resolution value, cheap enough for every loop turn. */
static uint32_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

/* ---- query set ---------------------------------------------------------------------------- */

static const struct {
	const char *name;
	uint16_t type;
} k_types[] = {
    {"A", 1},      {"NS", 2},      {"CNAME", 5},  {"SOA", 6},    {"PTR", 12},  {"MX", 15},
    {"TXT", 16},   {"AAAA", 28},   {"SRV", 33},   {"NAPTR", 35}, {"DS", 43},   {"RRSIG", 46},
    {"NSEC", 47},  {"DNSKEY", 48}, {"NSEC3", 50}, {"TLSA", 52},  {"SVCB", 64}, {"HTTPS", 65},
    {"AXFR", 252}, {"ANY", 255},   {"CAA", 257},
};

/* Returns the type code, or -1 for a mnemonic we do not know (TYPEnnn is accepted). */
static int parse_type(const char *s)
{
	for (size_t i = 0; i < sizeof(k_types) / sizeof(k_types[0]); i++) {
		if (strcasecmp(s, k_types[i].name) == 0) {
			return k_types[i].type;
		}
	}
	if (strncasecmp(s, "TYPE", 4) == 0 && isdigit((unsigned char)s[4])) {
		char *end;
		long v = strtol(s + 4, &end, 10);
		if (*end == '\0' && v >= 0 && v <= 65535) {
			return (int)v;
		}
	}
	return -1;
}

/* Writes NAME in wire form to OUT (at least 255 bytes); returns its length or an error text. */
static const char *name_to_wire(const char *name, uint8_t *out, size_t *out_len)
{
	size_t len = 0;
	const char *p = name;
	if (strcmp(name, ".") == 0) {
		p = "";
	}
	while (*p != '\0') {
		const char *dot = strchr(p, '.');
		size_t lab = dot ? (size_t)(dot - p) : strlen(p);
		if (lab == 0) {
			return "empty label";
		}
		if (lab > 63) {
			return "label longer than 63 bytes";
		}
		if (memchr(p, '\\', lab) != NULL) {
			return "escapes are not supported";
		}
		if (len + 1 + lab + 1 > 255) {
			return "name longer than 255 bytes";
		}
		out[len++] = (uint8_t)lab;
		memcpy(out + len, p, lab);
		len += lab;
		p += lab;
		if (*p == '.') {
			p++;
		}
	}
	out[len++] = 0;
	*out_len = len;
	return NULL;
}

static const char *qset_add(qset_t *qs, const char *name, const char *type, unsigned edns, bool rd)
{
	uint8_t wire[QUERY_MAX];
	size_t nlen;
	int t = parse_type(type);
	if (t < 0) {
		return "unknown query type";
	}
	const char *err = name_to_wire(name, wire + 12, &nlen);
	if (err != NULL) {
		return err;
	}
	memset(wire, 0, 12);
	put16(wire + 2, rd ? 0x0100 : 0);   /* flags: RD or nothing */
	put16(wire + 4, 1);                 /* QDCOUNT */
	put16(wire + 10, edns > 0 ? 1 : 0); /* ARCOUNT */
	size_t len = 12 + nlen;
	put16(wire + len, (uint16_t)t);
	put16(wire + len + 2, 1); /* class IN */
	len += 4;
	size_t qend = len;
	if (edns > 0) {
		static const uint8_t opt[11] = {0, 0, 41, 0, 0, 0, 0, 0, 0, 0, 0};
		memcpy(wire + len, opt, sizeof(opt));
		put16(wire + len + 3, (uint16_t)edns);
		len += sizeof(opt);
	}
	if (qs->arena_len + len > qs->arena_cap) {
		qs->arena_cap = qs->arena_cap ? qs->arena_cap * 2 : 65536;
		qs->arena = xrealloc(qs->arena, qs->arena_cap);
	}
	if (qs->n == qs->cap) {
		qs->cap = qs->cap ? qs->cap * 2 : 1024;
		qs->q = xrealloc(qs->q, qs->cap * sizeof(query_t));
	}
	if (qs->arena_len > UINT32_MAX - len) {
		return "query set too large";
	}
	memcpy(qs->arena + qs->arena_len, wire, len);
	qs->q[qs->n++] = (query_t){(uint32_t)qs->arena_len, (uint16_t)len, (uint16_t)qend};
	qs->arena_len += len;
	return NULL;
}

/* Reads "name type" lines; blank lines and lines starting with '#' are skipped. */
static void qset_load(qset_t *qs, const char *path, unsigned edns, bool rd)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		die("%s: %s", path, strerror(errno));
	}
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	while (getline(&line, &cap, f) != -1) {
		lineno++;
		char name[1024], type[64], extra[2];
		int n = sscanf(line, " %1023s %63s %1s", name, type, extra);
		if (n <= 0 || name[0] == '#') {
			continue;
		}
		if (n != 2) {
			die("%s:%u: expected 'name type'", path, lineno);
		}
		const char *err = qset_add(qs, name, type, edns, rd);
		if (err != NULL) {
			die("%s:%u: %s: '%s %s'", path, lineno, err, name, type);
		}
		if (qs->n > UINT32_MAX / 2) {
			die("%s: too many queries", path);
		}
	}
	if (ferror(f)) {
		die("%s: read error", path);
	}
	free(line);
	fclose(f);
	if (qs->n == 0) {
		die("%s: no queries", path);
	}
}

/* One EDNS Client Subnet option (RFC 7871), wire form from the option code on. */
typedef struct {
	uint8_t wire[ECS_OPT_MAX];
	uint8_t len;
} ecs_opt_t;

/* Parses "ADDR/LEN" (or a bare address: a host prefix) into an ECS option with scope 0. */
static const char *ecs_parse(const char *text, ecs_opt_t *out)
{
	char addr[64];
	const char *slash = strchr(text, '/');
	size_t alen = slash != NULL ? (size_t)(slash - text) : strlen(text);
	if (alen == 0 || alen >= sizeof(addr)) {
		return "bad address";
	}
	memcpy(addr, text, alen);
	addr[alen] = '\0';
	uint8_t bytes[16];
	unsigned family, max;
	if (inet_pton(AF_INET, addr, bytes) == 1) {
		family = 1;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, bytes) == 1) {
		family = 2;
		max = 128;
	} else {
		return "not an IPv4 or IPv6 address";
	}
	unsigned plen = max;
	if (slash != NULL) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(slash + 1, &end, 10);
		if (errno != 0 || *end != '\0' || end == slash + 1 || v > max) {
			return "bad prefix length";
		}
		plen = (unsigned)v;
	}
	unsigned nbytes = (plen + 7) / 8;
	if (plen % 8 != 0) {
		bytes[nbytes - 1] &=
		    (uint8_t)(0xff << (8 - plen % 8)); /* RFC 7871: bits beyond zero */
	}
	put16(out->wire, 8); /* OPTION-CODE: edns-client-subnet */
	put16(out->wire + 2, (uint16_t)(4 + nbytes));
	put16(out->wire + 4, (uint16_t)family);
	out->wire[6] = (uint8_t)plen;
	out->wire[7] = 0; /* SCOPE PREFIX-LENGTH: 0 in queries */
	memcpy(out->wire + 8, bytes, nbytes);
	out->len = (uint8_t)(8 + nbytes);
	return NULL;
}

/* Reads one ECS subnet per line ("ADDR/LEN"); blank lines and '#' lines are skipped. */
static ecs_opt_t *ecs_load(const char *path, size_t *count)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		die("%s: %s", path, strerror(errno));
	}
	ecs_opt_t *v = NULL;
	size_t n = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	unsigned lineno = 0;
	while (getline(&line, &lcap, f) != -1) {
		lineno++;
		char text[128], extra[2];
		int k = sscanf(line, " %127s %1s", text, extra);
		if (k <= 0 || text[0] == '#') {
			continue;
		}
		if (k != 1) {
			die("%s:%u: expected one subnet per line", path, lineno);
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = xrealloc(v, cap * sizeof(*v));
		}
		const char *err = ecs_parse(text, &v[n]);
		if (err != NULL) {
			die("%s:%u: %s: '%s'", path, lineno, err, text);
		}
		n++;
	}
	if (ferror(f)) {
		die("%s: read error", path);
	}
	free(line);
	fclose(f);
	if (n == 0) {
		die("%s: no subnets", path);
	}
	*count = n;
	return v;
}

/*
 * Builds the query set with ECS: max(queries, subnets) packets, packet i being query i mod
 * queries with subnet i mod subnets appended to its (empty) OPT record. Every packet is built
 * here, before the run, so sending costs the same with or without ECS.
 */
static void qset_add_ecs(qset_t *qs, const ecs_opt_t *ecs, size_t necs)
{
	qset_t out = {0};
	size_t n = qs->n > necs ? qs->n : necs;
	out.cap = n;
	out.q = xcalloc(n, sizeof(query_t));
	out.arena_cap = n * QUERY_MAX;
	out.arena = xcalloc(out.arena_cap, 1);
	for (size_t i = 0; i < n; i++) {
		const query_t *bq = &qs->q[i % qs->n];
		const ecs_opt_t *e = &ecs[i % necs];
		uint8_t *w = out.arena + out.arena_len;
		memcpy(w, qs->arena + bq->off, bq->len);
		/* The OPT record is last and has no data yet: its RDLENGTH is the last two bytes.
		 */
		put16(w + bq->len - 2, e->len);
		memcpy(w + bq->len, e->wire, e->len);
		size_t len = bq->len + e->len;
		out.q[i] = (query_t){(uint32_t)out.arena_len, (uint16_t)len, bq->qend};
		out.arena_len += len;
	}
	out.n = n;
	free(qs->arena);
	free(qs->q);
	*qs = out;
}

static int query_cmp_len(const void *a, const void *b)
{
	const query_t *x = a, *y = b;
	if (x->len != y->len) {
		return x->len < y->len ? -1 : 1;
	}
	return x->off < y->off ? -1 : (x->off > y->off); /* arena order = file order: stable */
}

/*
 * Orders each run of SORT_CHUNK queries by length, keeping file order within a length. UDP GSO
 * can only fold equal-length datagrams into one send, so this gives foldable runs, while any
 * SORT_CHUNK consecutive queries are still exactly the file's mix: a short run or one socket's
 * slice of the list is not biased towards short or long names.
 */
static void qset_sort_chunks(qset_t *qs)
{
	for (size_t i = 0; i < qs->n; i += SORT_CHUNK) {
		size_t n = qs->n - i < SORT_CHUNK ? qs->n - i : SORT_CHUNK;
		qsort(qs->q + i, n, sizeof(query_t), query_cmp_len);
	}
}

/* Checks an answer against the query it claims to answer and counts it; false if malformed. */
static bool check_answer(const qset_t *qs, uint32_t qi, const uint8_t *p, size_t len, stats_t *st)
{
	const query_t *q = &qs->q[qi];
	const uint8_t *w = qs->arena + q->off;
	if (len < q->qend || !(p[2] & 0x80) || memcmp(p + 4, w + 4, 2) != 0 ||
	    memcmp(p + 12, w + 12, q->qend - 12u) != 0) {
		st->bad++;
		return false;
	}
	st->recv++;
	st->rcode[p[3] & 0x0f]++;
	if (p[2] & 0x02) {
		st->tc++;
	}
	return true;
}

/* ---- UDP ---------------------------------------------------------------------------------- */

/* Buffers shared by all sockets: each batch is sent or consumed before the next is built. */
typedef struct {
	/* Receive side, set up once: the kernel only writes msg_len and msg_flags back. */
	struct mmsghdr rmsgs[BATCH_MAX];
	struct iovec riov[BATCH_MAX];
	uint8_t (*buf)[UDP_RECV_MAX];
	/* Send side: message m carries nq[m] queries of seg[m] bytes from SENDBUF. */
	struct mmsghdr msgs[BATCH_MAX];
	struct iovec iov[BATCH_MAX];
	uint8_t *sendbuf;
	size_t send_len;
	unsigned nmsg;
	uint16_t nq[BATCH_MAX], seg[BATCH_MAX];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl[BATCH_MAX];
} udp_io_t;

static int open_udp(const opts_t *o)
{
	int fd = socket(o->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		die("socket: %s", strerror(errno));
	}
	if (connect(fd, (const struct sockaddr *)&o->addr, o->addr_len) != 0) {
		die("connect %s:%u: %s", o->server, o->port, strerror(errno));
	}
	return fd;
}

static udp_io_t *udp_io_new(void)
{
	udp_io_t *io = xcalloc(1, sizeof(*io));
	io->buf = xcalloc(BATCH_MAX, UDP_RECV_MAX);
	io->sendbuf = xcalloc(BATCH_MAX, QUERY_MAX);
	for (unsigned i = 0; i < BATCH_MAX; i++) {
		io->riov[i] = (struct iovec){io->buf[i], UDP_RECV_MAX};
		io->rmsgs[i].msg_hdr = (struct msghdr){.msg_iov = &io->riov[i], .msg_iovlen = 1};
	}
	return io;
}

static void udp_io_free(udp_io_t *io)
{
	free(io->buf);
	free(io->sendbuf);
	free(io);
}

/* Receives one batch of at most BATCH answers; returns the number of datagrams. */
static int udp_recv(udp_sock_t *s, udp_io_t *io, unsigned batch, const qset_t *qs, stats_t *st)
{
	int n = recvmmsg(s->fd, io->rmsgs, batch, MSG_DONTWAIT, NULL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			st->errors++; /* e.g. ECONNREFUSED from an ICMP port unreachable */
		}
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const uint8_t *p = io->buf[i];
		size_t len = io->rmsgs[i].msg_len;
		if (len < 12) {
			st->bad++;
			continue;
		}
		uint16_t id = get16(p);
		uint32_t qi = s->qidx[id];
		if (qi == 0) {
			st->late++; /* already timed out, or never ours */
			continue;
		}
		if (check_answer(qs, qi - 1, p, len, st)) {
			s->qidx[id] = 0;
			s->inflight--;
		}
	}
	return n;
}

/* Appends query Q with ID to the batch being built; GSO folds equal lengths. */
static void udp_stage(udp_io_t *io, const query_t *q, const qset_t *qs, uint16_t id, bool gso)
{
	uint8_t *p = io->sendbuf + io->send_len;
	memcpy(p, qs->arena + q->off, q->len);
	put16(p, id);
	io->send_len += q->len;
	unsigned m = io->nmsg;
	if (gso && m > 0 && io->seg[m - 1] == q->len && io->nq[m - 1] < GSO_SEGS_MAX) {
		io->iov[m - 1].iov_len += q->len;
		io->nq[m - 1]++;
		return;
	}
	io->iov[m] = (struct iovec){p, q->len};
	io->nq[m] = 1;
	io->seg[m] = q->len;
	io->nmsg++;
}

/* Turns the staged queries into mmsghdrs; several equal-length ones become one GSO send. */
static void udp_seal(udp_io_t *io)
{
	for (unsigned m = 0; m < io->nmsg; m++) {
		struct msghdr *h = &io->msgs[m].msg_hdr;
		*h = (struct msghdr){.msg_iov = &io->iov[m], .msg_iovlen = 1};
		if (io->nq[m] > 1) {
			h->msg_control = io->ctl[m].buf;
			h->msg_controllen = sizeof(io->ctl[m].buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(h);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			uint16_t seg = io->seg[m];
			memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		}
	}
}

/*
 * Sends up to COUNT queries in one sendmmsg; returns the number of queries sent. *GSO is cleared
 * (with a warning) if the kernel or route refuses UDP_SEGMENT, and the batch retried next time.
 */
static int udp_send(udp_sock_t *s, udp_io_t *io, unsigned count, const qset_t *qs, uint32_t ms,
                    bool *gso, stats_t *st)
{
	unsigned room = 65535u - (uint16_t)(s->head - s->tail);
	if (count > room) {
		count = room;
	}
	if (count == 0) {
		return 0;
	}
	uint16_t first = s->head;
	size_t first_pos = s->qpos;
	io->nmsg = 0;
	io->send_len = 0;
	for (unsigned i = 0; i < count; i++) {
		udp_stage(io, &qs->q[s->qpos], qs, s->head, *gso);
		s->qidx[s->head] = (uint32_t)s->qpos + 1;
		s->sent_ms[s->head] = ms;
		s->head++;
		if (++s->qpos == qs->n) {
			s->qpos = 0;
		}
	}
	udp_seal(io);
	int n = sendmmsg(s->fd, io->msgs, io->nmsg, 0);
	if (n < 0) {
		if (*gso && (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP)) {
			fprintf(stderr, "loadgen: UDP GSO refused (%s); sending without it\n",
			        strerror(errno));
			*gso = false;
		} else if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) {
			st->errors++;
		}
		n = 0;
	}
	unsigned sent = 0;
	for (int m = 0; m < n; m++) {
		sent += io->nq[m];
	}
	/* Give back the IDs of what the kernel did not take. */
	for (unsigned i = sent; i < count; i++) {
		s->qidx[(uint16_t)(first + i)] = 0;
	}
	s->head = (uint16_t)(first + sent);
	s->qpos = (first_pos + sent) % qs->n;
	s->inflight += sent;
	st->sent += sent;
	return (int)sent;
}

/* Frees the slots of queries older than the timeout; IDs go out in order, so only the tail. */
static void udp_expire(udp_sock_t *s, uint32_t ms, uint32_t timeout_ms, stats_t *st)
{
	while (s->tail != s->head) {
		if (s->qidx[s->tail] != 0) {
			if (ms - s->sent_ms[s->tail] < timeout_ms) {
				break;
			}
			s->qidx[s->tail] = 0;
			s->inflight--;
			st->lost++;
		}
		s->tail++;
	}
}

static void run_udp(const opts_t *o, const qset_t *qs, stats_t *st, measure_t *m)
{
	unsigned ns = o->sockets;
	unsigned per_win = (o->window + ns - 1) / ns;
	bool gso = o->gso;
	udp_sock_t *socks = xcalloc(ns, sizeof(*socks));
	udp_io_t *io = udp_io_new();
	for (unsigned i = 0; i < ns; i++) {
		socks[i].fd = open_udp(o);
		socks[i].qidx = xcalloc(ID_SPACE, sizeof(uint32_t));
		socks[i].sent_ms = xcalloc(ID_SPACE, sizeof(uint32_t));
		/* Spread the sockets over the query list so they do not send the same names. */
		socks[i].qpos = (qs->n * i) / ns;
	}
	uint64_t last = now_ns();
	uint64_t warm_end = last + (uint64_t)(o->warmup * 1e9);
	uint64_t end = warm_end + (uint64_t)(o->duration * 1e9);
	bool warm = o->warmup <= 0;
	/* --rate: what may have left by now, counted from the start of the run */
	uint64_t rate_start = last, rate_sent = 0;
	measure_begin(m, st);
	/*
	 * Busy poll, no epoll: this process owns its CPU during a run, and sleeping would make
	 * every answer pay for a wake-up, while an epoll registration costs a callback per datagram
	 * even when nobody waits. The clock is read once per socket visit (a vDSO read, tens of
	 * nanoseconds against the microseconds of a syscall) to charge fruitless visits as idle.
	 */
	while (!g_stop && last < end) {
		if (!warm && last >= warm_end) {
			warm = true;
			measure_begin(m, st);
		}
		uint32_t ms = (uint32_t)(last / 1000000u);
		for (unsigned i = 0; i < ns; i++) {
			udp_sock_t *s = &socks[i];
			/* Asking for more than is in flight would only make the kernel look. */
			unsigned rb = s->inflight < o->batch ? s->inflight : o->batch;
			int done = rb ? udp_recv(s, io, rb, qs, st) : 0;
			udp_expire(s, ms, o->timeout_ms, st);
			unsigned want = s->inflight < per_win ? per_win - s->inflight : 0;
			if (o->rate) {
				uint64_t due =
				    (uint64_t)((double)(last - rate_start) * o->rate / 1e9);
				uint64_t left = due > rate_sent ? due - rate_sent : 0;
				want = left < want ? (unsigned)left : want;
			}
			if (want) {
				int n = udp_send(s, io, want < o->batch ? want : o->batch, qs, ms,
				                 &gso, st);
				rate_sent += (uint64_t)n;
				done += n;
			}
			uint64_t t = now_ns();
			if (done == 0) {
				st->idle_ns += t - last;
			}
			last = t;
		}
		/* At a fixed rate the server is not the limit: do not spin a shared CPU. */
		if (o->rate) {
			nanosleep(&(struct timespec){0, 200000}, NULL);
		}
	}
	/* --rate: every query sent is answered or counted lost, none is left uncounted. */
	for (bool busy = o->rate != 0; busy && !g_stop;) {
		busy = false;
		uint32_t ms = (uint32_t)(now_ns() / 1000000u);
		for (unsigned i = 0; i < ns; i++) {
			udp_sock_t *s = &socks[i];
			if (s->inflight) {
				udp_recv(s, io, s->inflight < o->batch ? s->inflight : o->batch, qs,
				         st);
				udp_expire(s, ms, o->timeout_ms, st);
				busy = busy || s->inflight;
			}
		}
		nanosleep(&(struct timespec){0, 200000}, NULL);
	}
	measure_end(m);
	for (unsigned i = 0; i < ns; i++) {
		close(socks[i].fd);
		free(socks[i].qidx);
		free(socks[i].sent_ms);
	}
	udp_io_free(io);
	free(socks);
}

/* ---- TCP ---------------------------------------------------------------------------------- */

typedef struct {
	const opts_t *o;
	const qset_t *qs;
	stats_t *st;
	int ep;
	unsigned mask; /* slots per connection - 1; a power of two >= pipeline */
} tcp_ctx_t;

static int tcp_connect(const opts_t *o)
{
	int fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		die("socket: %s", strerror(errno));
	}
	/* A blocking connect is fine: the benchmark runs on loopback. */
	if (connect(fd, (const struct sockaddr *)&o->addr, o->addr_len) != 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
		die("fcntl: %s", strerror(errno));
	}
	return fd;
}

static void tcp_register(tcp_ctx_t *cx, tcp_conn_t *c)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	if (epoll_ctl(cx->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		die("epoll_ctl: %s", strerror(errno));
	}
	c->want_out = false;
}

static void tcp_set_out(tcp_ctx_t *cx, tcp_conn_t *c, bool want)
{
	if (c->want_out == want) {
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0u), .data.ptr = c};
	if (epoll_ctl(cx->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
		die("epoll_ctl: %s", strerror(errno));
	}
	c->want_out = want;
}

/* Drops a connection (server closed it, error, or timeout) and opens a new one. */
static void tcp_reconnect(tcp_ctx_t *cx, tcp_conn_t *c)
{
	cx->st->lost += c->inflight;
	if (c->fd >= 0) {
		close(c->fd);
	}
	memset(c->slot_q, 0, (cx->mask + 1u) * sizeof(uint32_t));
	c->inflight = 0;
	c->in_len = 0;
	c->out_len = c->out_off = 0;
	c->fd = tcp_connect(cx->o);
	if (c->fd < 0) {
		cx->st->errors++;
		return;
	}
	cx->st->reconnects++;
	tcp_register(cx, c);
}

/* Writes pending output; false if the connection failed. */
static bool tcp_flush(tcp_ctx_t *cx, tcp_conn_t *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN) {
				tcp_set_out(cx, c, true);
				return true;
			}
			if (errno == EINTR) {
				continue;
			}
			return false;
		}
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	tcp_set_out(cx, c, false);
	return true;
}

/* Queues queries until the pipeline is full or the next ID's slot is still taken. */
static void tcp_fill(tcp_ctx_t *cx, tcp_conn_t *c, uint32_t ms)
{
	if (c->out_off > 0) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->inflight == 0) {
		c->last_ms = ms;
	}
	while (c->inflight < cx->o->pipeline) {
		unsigned slot = c->seq & cx->mask;
		if (c->slot_q[slot] != 0) {
			break; /* answers came out of order; wait for the older one */
		}
		const query_t *q = &cx->qs->q[c->qpos];
		uint8_t *p = c->out + c->out_len;
		put16(p, q->len);
		memcpy(p + 2, cx->qs->arena + q->off, q->len);
		put16(p + 2, c->seq);
		c->out_len += 2u + q->len;
		c->slot_q[slot] = (uint32_t)c->qpos + 1;
		c->slot_id[slot] = c->seq;
		c->seq++;
		c->inflight++;
		cx->st->sent++;
		if (++c->qpos == cx->qs->n) {
			c->qpos = 0;
		}
	}
}

static void tcp_answer(tcp_ctx_t *cx, tcp_conn_t *c, const uint8_t *p, size_t len, uint32_t ms)
{
	if (len < 12) {
		cx->st->bad++;
		return;
	}
	uint16_t id = get16(p);
	unsigned slot = id & cx->mask;
	uint32_t qi = c->slot_q[slot];
	if (qi == 0 || c->slot_id[slot] != id) {
		cx->st->late++;
		return;
	}
	if (check_answer(cx->qs, qi - 1, p, len, cx->st)) {
		c->slot_q[slot] = 0;
		c->inflight--;
		c->last_ms = ms;
	}
}

/* Reads what is available and handles every complete frame; false if the connection ended. */
static bool tcp_read(tcp_ctx_t *cx, tcp_conn_t *c, uint32_t ms)
{
	ssize_t n = recv(c->fd, c->in + c->in_len, TCP_IN_CAP - c->in_len, 0);
	if (n == 0) {
		return false;
	}
	if (n < 0) {
		return errno == EAGAIN || errno == EINTR;
	}
	c->in_len += (size_t)n;
	size_t pos = 0;
	while (c->in_len - pos >= 2) {
		size_t flen = get16(c->in + pos);
		if (c->in_len - pos < 2 + flen) {
			break;
		}
		tcp_answer(cx, c, c->in + pos + 2, flen, ms);
		pos += 2 + flen;
	}
	if (pos > 0) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	return true;
}

static void tcp_service(tcp_ctx_t *cx, tcp_conn_t *c, uint32_t events, uint32_t ms)
{
	bool ok = true;
	if (events & EPOLLIN) {
		ok = tcp_read(cx, c, ms);
	} else if (events & (EPOLLERR | EPOLLHUP)) {
		ok = false;
	}
	if (ok) {
		tcp_fill(cx, c, ms);
		ok = tcp_flush(cx, c);
	}
	if (!ok) {
		tcp_reconnect(cx, c);
		if (c->fd >= 0) {
			tcp_fill(cx, c, ms);
			(void)tcp_flush(cx, c);
		}
	}
}

/* Retries dead connections and drops ones whose queries went unanswered for the timeout. */
static void tcp_housekeep(tcp_ctx_t *cx, tcp_conn_t *conns, unsigned n, uint32_t ms)
{
	for (unsigned i = 0; i < n; i++) {
		tcp_conn_t *c = &conns[i];
		if (c->fd >= 0 && (c->inflight == 0 || ms - c->last_ms < cx->o->timeout_ms)) {
			continue;
		}
		tcp_reconnect(cx, c);
		if (c->fd >= 0) {
			tcp_fill(cx, c, ms);
			(void)tcp_flush(cx, c);
		}
	}
}

static void run_tcp(const opts_t *o, const qset_t *qs, stats_t *st, measure_t *m)
{
	tcp_ctx_t cx = {.o = o, .qs = qs, .st = st};
	unsigned slots = 1;
	while (slots < o->pipeline) {
		slots <<= 1;
	}
	cx.mask = slots - 1;
	cx.ep = epoll_create1(EPOLL_CLOEXEC);
	if (cx.ep < 0) {
		die("epoll_create1: %s", strerror(errno));
	}
	unsigned nc = o->connections;
	tcp_conn_t *conns = xcalloc(nc, sizeof(*conns));
	uint32_t ms = now_ms();
	for (unsigned i = 0; i < nc; i++) {
		tcp_conn_t *c = &conns[i];
		c->slot_q = xcalloc(slots, sizeof(uint32_t));
		c->slot_id = xcalloc(slots, sizeof(uint16_t));
		c->in = xcalloc(1, TCP_IN_CAP);
		c->out = xcalloc(o->pipeline, 2 + QUERY_MAX);
		c->qpos = (qs->n * i) / nc;
		c->fd = tcp_connect(o);
		if (c->fd < 0) {
			die("connect %s:%u (connection %u): %s", o->server, o->port, i,
			    strerror(errno));
		}
		tcp_register(&cx, c);
	}
	for (unsigned i = 0; i < nc; i++) {
		tcp_fill(&cx, &conns[i], ms);
		if (!tcp_flush(&cx, &conns[i])) {
			die("send: %s", strerror(errno));
		}
	}
	double start = now_sec();
	double warm_end = start + o->warmup, end = warm_end + o->duration;
	bool warm = o->warmup <= 0;
	measure_begin(m, st);
	uint32_t last_house = ms;
	enum { MAX_EVENTS = 256 };
	struct epoll_event evs[MAX_EVENTS];
	while (!g_stop) {
		double t = now_sec();
		if (!warm && t >= warm_end) {
			warm = true;
			measure_begin(m, st);
		}
		if (t >= end) {
			break;
		}
		uint64_t before = now_ns();
		int n = epoll_wait(cx.ep, evs, MAX_EVENTS, 1);
		st->idle_ns += now_ns() - before;
		ms = now_ms();
		for (int i = 0; i < n; i++) {
			tcp_service(&cx, evs[i].data.ptr, evs[i].events, ms);
		}
		if (ms - last_house >= 100) {
			tcp_housekeep(&cx, conns, nc, ms);
			last_house = ms;
		}
	}
	measure_end(m);
	for (unsigned i = 0; i < nc; i++) {
		if (conns[i].fd >= 0) {
			close(conns[i].fd);
		}
		free(conns[i].slot_q);
		free(conns[i].slot_id);
		free(conns[i].in);
		free(conns[i].out);
	}
	free(conns);
	close(cx.ep);
}

/* ---- options and report ------------------------------------------------------------------- */

static const char *const k_rcodes[16] = {
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
    "NXRRSET", "NOTAUTH", "NOTZONE",  "RCODE11",  "RCODE12", "RCODE13", "RCODE14",  "RCODE15",
};

static void usage(FILE *f)
{
	fputs("usage: loadgen [options]\n"
	      "  --server IP          server address (IPv4 or IPv6), default 127.0.0.1\n"
	      "  --port N             server port, default 53\n"
	      "  --duration SEC       measured time, default 10\n"
	      "  --warmup SEC         unmeasured time before it, default 1\n"
	      "  --queries FILE       'name type' lines; default one query, see --qname\n"
	      "  --qname NAME         query name without --queries, default www.example.test\n"
	      "  --qtype TYPE         query type without --queries, default A\n"
	      "  --edns SIZE          add an OPT record advertising SIZE (0 = none, default)\n"
	      "  --rd                 set RD (recursion desired) in every query; default clear\n"
	      "  --ecs-file FILE      one subnet per line ('198.51.100.0/24', '2001:db8::/56'):\n"
	      "                       query i carries subnet i mod N as an ECS option (needs\n"
	      "                       --edns); max(queries, subnets) packets are prebuilt\n"
	      "  --cookie HEX         a DNS COOKIE option in every query: the client cookie\n"
	      "                       (16 hex digits) or client and server cookie (48; needs\n"
	      "                       --edns, excludes --ecs-file)\n"
	      "  --timeout MS         count a query lost after MS, default 1000\n"
	      "  --json               print one JSON object instead of text\n"
	      "UDP (default):\n"
	      "  --window N           queries in flight over all sockets, default 128\n"
	      "  --sockets N          UDP sockets (source ports), default 8, max 64\n"
	      "  --batch N            queries per sendmmsg/recvmmsg, default 64, max 256\n"
	      "  --rate QPS           send at most QPS queries per second (a soak test's load)\n"
	      "                       and wait for what is in flight at the end, so that\n"
	      "                       sent = received + lost; default 0, unlimited\n"
	      "  --no-gso             one datagram per sendmmsg entry instead of folding\n"
	      "                       equal-length queries into UDP GSO sends (cheaper for us,\n"
	      "                       identical datagrams for the server)\n"
	      "TCP:\n"
	      "  --tcp                use TCP with 2-byte framing\n"
	      "  --connections N      connections, default 32\n"
	      "  --pipeline K         queries in flight per connection, default 16, max 1024\n",
	      f);
}

typedef enum { ARG_STR, ARG_UINT, ARG_SECS, ARG_SET, ARG_CLEAR } arg_kind_t;

/* One row per option: where it is stored in opts_t and its bounds. */
typedef struct {
	const char *name;
	arg_kind_t kind;
	size_t off;
	double lo, hi;
} opt_spec_t;

#define OPT(name, kind, field, lo, hi)                                                             \
	{                                                                                          \
		name, kind, offsetof(opts_t, field), lo, hi                                        \
	}
static const opt_spec_t k_opts[] = {
    OPT("server", ARG_STR, server, 0, 0),
    OPT("port", ARG_UINT, port, 1, 65535),
    OPT("duration", ARG_SECS, duration, 0.1, 86400),
    OPT("warmup", ARG_SECS, warmup, 0, 86400),
    OPT("queries", ARG_STR, queries_file, 0, 0),
    OPT("qname", ARG_STR, qname, 0, 0),
    OPT("qtype", ARG_STR, qtype, 0, 0),
    OPT("edns", ARG_UINT, edns, 0, 65535),
    OPT("rd", ARG_SET, rd, 0, 0),
    OPT("ecs-file", ARG_STR, ecs_file, 0, 0),
    OPT("cookie", ARG_STR, cookie, 0, 0),
    OPT("timeout", ARG_UINT, timeout_ms, 1, 60000),
    OPT("json", ARG_SET, json, 0, 0),
    OPT("window", ARG_UINT, window, 1, 1000000),
    OPT("sockets", ARG_UINT, sockets, 1, SOCKETS_MAX),
    OPT("batch", ARG_UINT, batch, 1, BATCH_MAX),
    OPT("rate", ARG_UINT, rate, 0, 100000000),
    OPT("no-gso", ARG_CLEAR, gso, 0, 0),
    OPT("tcp", ARG_SET, tcp, 0, 0),
    OPT("connections", ARG_UINT, connections, 1, 10000),
    OPT("pipeline", ARG_UINT, pipeline, 1, PIPELINE_MAX),
};
#define N_OPTS (sizeof(k_opts) / sizeof(k_opts[0]))

static void set_opt(opts_t *o, const opt_spec_t *spec, const char *arg)
{
	void *field = (char *)o + spec->off;
	char *end;
	switch (spec->kind) {
	case ARG_STR:
		*(const char **)field = arg;
		return;
	case ARG_SET:
	case ARG_CLEAR:
		*(bool *)field = spec->kind == ARG_SET;
		return;
	case ARG_UINT: {
		errno = 0;
		unsigned long v = strtoul(arg, &end, 10);
		if (errno != 0 || *end != '\0' || end == arg || arg[0] == '-' || v < spec->lo ||
		    v > spec->hi) {
			die("--%s: expected an integer in [%.0f, %.0f], got '%s'", spec->name,
			    spec->lo, spec->hi, arg);
		}
		*(unsigned *)field = (unsigned)v;
		return;
	}
	case ARG_SECS: {
		double v = strtod(arg, &end);
		if (*end != '\0' || end == arg || !(v >= spec->lo) || v > spec->hi) {
			die("--%s: expected seconds in [%g, %g], got '%s'", spec->name, spec->lo,
			    spec->hi, arg);
		}
		*(double *)field = v;
		return;
	}
	}
}

static void resolve_server(opts_t *o)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)&o->addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&o->addr;
	if (inet_pton(AF_INET, o->server, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)o->port);
		o->addr_len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, o->server, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)o->port);
		o->addr_len = sizeof(*a6);
	} else {
		die("--server: '%s' is not an IPv4 or IPv6 address", o->server);
	}
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
	struct option longopts[N_OPTS + 2];
	for (size_t i = 0; i < N_OPTS; i++) {
		bool has_arg = k_opts[i].kind != ARG_SET && k_opts[i].kind != ARG_CLEAR;
		longopts[i] = (struct option){
		    k_opts[i].name, has_arg ? required_argument : no_argument, NULL, (int)i};
	}
	longopts[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[N_OPTS + 1] = (struct option){NULL, 0, NULL, 0};
	*o = (opts_t){.server = "127.0.0.1",
	              .port = 53,
	              .duration = 10,
	              .warmup = 1,
	              .qname = "www.example.test",
	              .qtype = "A",
	              .window = 128,
	              .sockets = 8,
	              .batch = 64,
	              .connections = 32,
	              .pipeline = 16,
	              .timeout_ms = 1000,
	              .gso = true};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c < 0 || (size_t)c >= N_OPTS) {
			usage(stderr);
			exit(2);
		}
		set_opt(o, &k_opts[c], optarg);
	}
	if (optind != argc) {
		die("unexpected argument '%s' (see --help)", argv[optind]);
	}
	if (o->window / o->sockets >= ID_SPACE - 1) {
		die("--window: at most %u queries per socket", ID_SPACE - 2);
	}
	resolve_server(o);
}

static void report_json(const opts_t *o, const stats_t *s, double secs, double cpu)
{
	printf("{\"mode\":\"%s\",\"server\":\"%s\",\"port\":%u,\"seconds\":%.3f,"
	       "\"sent\":%llu,\"received\":%llu,\"lost\":%llu,\"late\":%llu,\"bad\":%llu,"
	       "\"truncated\":%llu,\"errors\":%llu,\"reconnects\":%llu,\"qps\":%.1f,"
	       "\"cpu\":%.3f,\"idle\":%.3f,\"rcodes\":{",
	       o->tcp ? "tcp" : "udp", o->server, o->port, secs, (unsigned long long)s->sent,
	       (unsigned long long)s->recv, (unsigned long long)s->lost,
	       (unsigned long long)s->late, (unsigned long long)s->bad, (unsigned long long)s->tc,
	       (unsigned long long)s->errors, (unsigned long long)s->reconnects,
	       secs > 0 ? (double)s->recv / secs : 0, cpu,
	       secs > 0 ? (double)s->idle_ns / 1e9 / secs : 0);
	const char *sep = "";
	for (int i = 0; i < 16; i++) {
		if (s->rcode[i] != 0) {
			printf("%s\"%s\":%llu", sep, k_rcodes[i], (unsigned long long)s->rcode[i]);
			sep = ",";
		}
	}
	printf("}}\n");
}

static void report_text(const opts_t *o, const stats_t *s, double secs, double cpu)
{
	printf("mode %s  server %s port %u  measured %.2f s\n", o->tcp ? "tcp" : "udp", o->server,
	       o->port, secs);
	if (o->tcp) {
		printf("connections %u  pipeline %u\n", o->connections, o->pipeline);
	} else {
		printf("sockets %u  window %u  batch %u  gso %s\n", o->sockets, o->window, o->batch,
		       o->gso ? "on" : "off");
	}
	printf("sent %llu  received %llu  lost %llu  late %llu  bad %llu  truncated %llu  "
	       "errors %llu  reconnects %llu\n",
	       (unsigned long long)s->sent, (unsigned long long)s->recv,
	       (unsigned long long)s->lost, (unsigned long long)s->late, (unsigned long long)s->bad,
	       (unsigned long long)s->tc, (unsigned long long)s->errors,
	       (unsigned long long)s->reconnects);
	printf("rcodes");
	for (int i = 0; i < 16; i++) {
		if (s->rcode[i] != 0) {
			printf("  %s %llu", k_rcodes[i], (unsigned long long)s->rcode[i]);
		}
	}
	printf("\nloadgen cpu %.0f%%  idle %.1f%%\n", cpu * 100,
	       secs > 0 ? 100.0 * (double)s->idle_ns / 1e9 / secs : 0);
	printf("q/s %.0f\n", secs > 0 ? (double)s->recv / secs : 0);
}

/* Prints the counters of the measured interval; CPU is our busy fraction of that interval. */
static void report(const opts_t *o, const stats_t *s, const measure_t *m)
{
	double secs = m->t1 - m->t0;
	double cpu = secs > 0 ? (m->cpu1 - m->cpu0) / secs : 0;
	if (o->json) {
		report_json(o, s, secs, cpu);
	} else {
		report_text(o, s, secs, cpu);
	}
}

static stats_t stats_sub(const stats_t *a, const stats_t *b)
{
	stats_t d = {
	    .sent = a->sent - b->sent,
	    .recv = a->recv - b->recv,
	    .lost = a->lost - b->lost,
	    .late = a->late - b->late,
	    .bad = a->bad - b->bad,
	    .tc = a->tc - b->tc,
	    .errors = a->errors - b->errors,
	    .reconnects = a->reconnects - b->reconnects,
	    .idle_ns = a->idle_ns - b->idle_ns,
	};
	for (int i = 0; i < 16; i++) {
		d.rcode[i] = a->rcode[i] - b->rcode[i];
	}
	return d;
}

int main(int argc, char **argv)
{
	opts_t o;
	parse_opts(argc, argv, &o);
	qset_t qs = {0};
	if (o.queries_file != NULL) {
		qset_load(&qs, o.queries_file, o.edns, o.rd);
	} else {
		const char *err = qset_add(&qs, o.qname, o.qtype, o.edns, o.rd);
		if (err != NULL) {
			die("--qname/--qtype: %s", err);
		}
	}
	if (o.ecs_file != NULL) {
		if (o.edns == 0) {
			die("--ecs-file needs --edns SIZE (ECS is an EDNS option)");
		}
		size_t necs;
		ecs_opt_t *ecs = ecs_load(o.ecs_file, &necs);
		if (qs.n > SIZE_MAX / QUERY_MAX || necs > SIZE_MAX / QUERY_MAX ||
		    (qs.n > necs ? qs.n : necs) * (size_t)QUERY_MAX > UINT32_MAX) {
			die("%s: too many queries with subnets", o.ecs_file);
		}
		qset_add_ecs(&qs, ecs, necs);
		free(ecs);
	}
	if (o.cookie != NULL) {
		/* The same option for every query: the ECS builder appends any one option. */
		size_t hex = strlen(o.cookie);
		ecs_opt_t c = {.len = (uint8_t)(4 + hex / 2)};
		if (o.edns == 0 || o.ecs_file != NULL || (hex != 16 && hex != 48))
			die("--cookie: 16 or 48 hex digits, with --edns and without --ecs-file");
		c.wire[1] = 10;
		c.wire[3] = (uint8_t)(hex / 2);
		for (size_t i = 0; i < hex / 2; i++) {
			unsigned v;
			if (sscanf(o.cookie + 2 * i, "%2x", &v) != 1)
				die("--cookie: '%s' is not hex", o.cookie);
			c.wire[4 + i] = (uint8_t)v;
		}
		qset_add_ecs(&qs, &c, 1);
	}
	if (o.gso && !o.tcp) {
		qset_sort_chunks(&qs);
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	stats_t st = {0};
	measure_t m = {0};
	if (o.tcp) {
		run_tcp(&o, &qs, &st, &m);
	} else {
		run_udp(&o, &qs, &st, &m);
	}
	stats_t d = stats_sub(&st, &m.base);
	report(&o, &d, &m);
	if (d.recv == 0) {
		fprintf(stderr, "loadgen: no answers from %s port %u\n", o.server, o.port);
	}
	free(qs.arena);
	free(qs.q);
	return d.recv > 0 ? 0 : 1;
}
