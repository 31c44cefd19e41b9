/*
 * echo: a do-nothing DNS "server" that returns each query with QR set. It is the ceiling for
 * bench/loadgen on this machine: no DNS server can answer faster than a loop that does no work,
 * so loadgen's rate against it shows how much headroom the load generator has.
 *
 * UDP (default): one socket, one thread, blocking recvmmsg and sendmmsg batches, which is what
 * the fastest servers do per worker. TCP (--tcp): one epoll thread echoing 2-byte framed
 * messages, to check loadgen's TCP mode the same way.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH_MAX 256
#define UDP_MAX   4096
/* One maximal frame plus read-ahead; a client that pipelines more waits for our writes. */
#define TCP_BUF (2 + 65535 + 16384)

typedef struct {
	int fd;
	uint8_t *buf;
	size_t len;      /* bytes held */
	size_t done;     /* bytes of complete frames already flipped */
	size_t sent;     /* of those, bytes written back */
	uint32_t events; /* registered with epoll: EPOLLIN, or EPOLLOUT while output is pending */
} conn_t;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("echo: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int bind_socket(const struct sockaddr_storage *ss, socklen_t len, int type)
{
	int fd = socket(ss->ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		die("socket: %s", strerror(errno));
	}
	int one = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) != 0) {
		die("bind: %s", strerror(errno));
	}
	return fd;
}

static void serve_udp(int fd, unsigned batch)
{
	static struct mmsghdr msgs[BATCH_MAX];
	static struct iovec iov[BATCH_MAX];
	static struct sockaddr_storage peers[BATCH_MAX];
	static uint8_t bufs[BATCH_MAX][UDP_MAX];
	for (;;) {
		for (unsigned i = 0; i < batch; i++) {
			iov[i] = (struct iovec){bufs[i], UDP_MAX};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &peers[i],
			                                  .msg_namelen = sizeof(peers[i]),
			                                  .msg_iov = &iov[i],
			                                  .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, msgs, batch, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			die("recvmmsg: %s", strerror(errno));
		}
		/* Compact the batch to the packets worth answering, flipping QR in place. */
		int out = 0;
		for (int i = 0; i < n; i++) {
			if (msgs[i].msg_len < 12 || (bufs[i][2] & 0x80)) {
				continue;
			}
			bufs[i][2] |= 0x80;
			iov[i].iov_len = msgs[i].msg_len;
			if (out != i) {
				msgs[out].msg_hdr = msgs[i].msg_hdr;
			}
			out++;
		}
		for (int done = 0; done < out;) {
			int m = sendmmsg(fd, msgs + done, (unsigned)(out - done), 0);
			if (m < 0) {
				if (errno == EINTR) {
					continue;
				}
				done++; /* e.g. ICMP unreachable from a gone client: skip that one
				         */
				continue;
			}
			done += m;
		}
	}
}

/* Flips QR in each new complete frame and writes back what is complete; false when closed. */
static bool conn_io(conn_t *c)
{
	if (c->sent == c->done && c->len < TCP_BUF) {
		ssize_t n = recv(c->fd, c->buf + c->len, TCP_BUF - c->len, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			return false;
		}
		if (n > 0) {
			c->len += (size_t)n;
		}
	}
	while (c->len - c->done >= 2) {
		size_t flen = (size_t)c->buf[c->done] << 8 | c->buf[c->done + 1];
		if (c->len - c->done < 2 + flen) {
			break;
		}
		if (flen >= 12) {
			c->buf[c->done + 4] |= 0x80;
		}
		c->done += 2 + flen;
	}
	while (c->sent < c->done) {
		ssize_t n = send(c->fd, c->buf + c->sent, c->done - c->sent, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN) {
				break;
			}
			if (errno == EINTR) {
				continue;
			}
			return false;
		}
		c->sent += (size_t)n;
	}
	if (c->sent > 0 && c->sent == c->done) {
		memmove(c->buf, c->buf + c->sent, c->len - c->sent);
		c->len -= c->sent;
		c->done = c->sent = 0;
	}
	return true;
}

static void serve_tcp(int lfd)
{
	if (listen(lfd, 1024) != 0) {
		die("listen: %s", strerror(errno));
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		die("epoll_create1: %s", strerror(errno));
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
		die("epoll_ctl: %s", strerror(errno));
	}
	for (;;) {
		struct epoll_event evs[256];
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			conn_t *c = evs[i].data.ptr;
			if (c == NULL) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd < 0) {
					continue;
				}
				int one = 1;
				(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				c = calloc(1, sizeof(*c));
				uint8_t *buf = malloc(TCP_BUF);
				if (c == NULL || buf == NULL) {
					die("out of memory");
				}
				*c = (conn_t){.fd = fd, .buf = buf, .events = EPOLLIN};
				ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = c};
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
					die("epoll_ctl: %s", strerror(errno));
				}
				continue;
			}
			if (!conn_io(c)) {
				close(c->fd);
				free(c->buf);
				free(c);
				continue;
			}
			/* While a write is pending, stop reading: the client waits for us. */
			uint32_t want = c->sent < c->done ? EPOLLOUT : EPOLLIN;
			if (want != c->events) {
				ev = (struct epoll_event){.events = want, .data.ptr = c};
				if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
					die("epoll_ctl: %s", strerror(errno));
				}
				c->events = want;
			}
		}
	}
}

static void usage(FILE *f)
{
	fputs("usage: echo [--addr IP] --port N [--tcp] [--batch N]\n"
	      "  Answers each DNS query with itself, QR set (UDP, or TCP with --tcp).\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"addr", required_argument, NULL, 'a'}, {"port", required_argument, NULL, 'p'},
	    {"tcp", no_argument, NULL, 't'},        {"batch", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
	};
	const char *addr = "127.0.0.1";
	long port = 0, batch = 64;
	bool tcp = false;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = strtol(optarg, &end, 10);
			break;
		case 'b':
			batch = strtol(optarg, &end, 10);
			break;
		case 't':
			tcp = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (end != NULL && *end != '\0') {
			die("bad number '%s'", optarg);
		}
	}
	if (optind != argc || port < 1 || port > 65535 || batch < 1 || batch > BATCH_MAX) {
		usage(stderr);
		return 2;
	}
	struct sockaddr_storage ss = {0};
	socklen_t len;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		len = sizeof(*a6);
	} else {
		die("--addr: '%s' is not an IPv4 or IPv6 address", addr);
	}
	if (tcp) {
		serve_tcp(bind_socket(&ss, len, SOCK_STREAM | SOCK_NONBLOCK));
	} else {
		serve_udp(bind_socket(&ss, len, SOCK_DGRAM), (unsigned)batch);
	}
	return 0;
}
