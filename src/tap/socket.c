/*
 * A Frame Streams byte stream over a UNIX socket with send and receive timeouts, for
 * fstrm_writer (which does the handshake over its read and write methods).
 */
#include "tap/socket.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/alloc.h"

typedef struct {
	struct sockaddr_un addr;
	int fd;
	atomic_bool *connected;
} tap_socket_t;

static fstrm_res sock_open(void *obj)
{
	tap_socket_t *s = obj;
	struct timeval tv = {.tv_sec = TAP_SOCKET_TIMEOUT_MS / 1000,
	                     .tv_usec = TAP_SOCKET_TIMEOUT_MS % 1000 * 1000};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fstrm_res_failure;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    connect(fd, (struct sockaddr *)&s->addr, sizeof(s->addr)) != 0) {
		close(fd);
		return fstrm_res_failure;
	}
	s->fd = fd;
	atomic_store(s->connected, true);
	return fstrm_res_success;
}

static fstrm_res sock_close(void *obj)
{
	tap_socket_t *s = obj;
	atomic_store(s->connected, false);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	return fstrm_res_success;
}

static fstrm_res sock_read(void *obj, void *data, size_t count)
{
	tap_socket_t *s = obj;
	uint8_t *p = data;
	while (count > 0) {
		ssize_t n = read(s->fd, p, count);
		if (n == 0)
			return fstrm_res_stop;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fstrm_res_failure; /* a timeout included: the reader is stuck */
		}
		p += n;
		count -= (size_t)n;
	}
	return fstrm_res_success;
}

/* Write all of @p iov; a partial write goes on from where it stopped. */
static fstrm_res sock_write(void *obj, const struct iovec *iov, int iovcnt)
{
	tap_socket_t *s = obj;
	int i = 0;
	size_t skip = 0; /* bytes of iov[i] already written */
	while (i < iovcnt) {
		struct iovec v[64];
		size_t nv = 0;
		v[nv++] = (struct iovec){(uint8_t *)iov[i].iov_base + skip, iov[i].iov_len - skip};
		for (int k = i + 1; k < iovcnt && nv < STEER_ARRAY_LEN(v); k++)
			v[nv++] = iov[k];
		struct msghdr h = {.msg_iov = v, .msg_iovlen = nv};
		ssize_t n = sendmsg(s->fd, &h, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fstrm_res_failure; /* a timeout included */
		}
		size_t left = (size_t)n;
		while (i < iovcnt && left >= iov[i].iov_len - skip) {
			left -= iov[i].iov_len - skip;
			skip = 0;
			i++;
		}
		skip += left;
	}
	return fstrm_res_success;
}

static fstrm_res sock_destroy(void *obj)
{
	tap_socket_t *s = obj;
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	return fstrm_res_success;
}

struct fstrm_writer *tap_socket_writer_new(const char *path,
                                           const struct fstrm_writer_options *wopt,
                                           atomic_bool *connected)
{
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return NULL;
	tap_socket_t *s = xcalloc(1, sizeof(*s));
	s->addr.sun_family = AF_UNIX;
	memcpy(s->addr.sun_path, path, strlen(path) + 1);
	s->fd = -1;
	s->connected = connected;
	atomic_store(connected, false);
	struct fstrm_rdwr *rdwr = fstrm_rdwr_init(s);
	fstrm_rdwr_set_open(rdwr, sock_open);
	fstrm_rdwr_set_close(rdwr, sock_close);
	fstrm_rdwr_set_read(rdwr, sock_read);
	fstrm_rdwr_set_write(rdwr, sock_write);
	fstrm_rdwr_set_destroy(rdwr, sock_destroy);
	return fstrm_writer_init(wopt, &rdwr);
}
