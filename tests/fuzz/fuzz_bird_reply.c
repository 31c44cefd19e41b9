/*
 * Fuzz target: the reader of BIRD's control socket replies (src/cluster/bird.c), which the
 * keeper runs against whatever answers on the configured socket. The file is included so
 * that its static reader is reachable without widening the library's API. The input is what
 * "BIRD" sends, fed through a socket pair and then closed; the reader must return a code
 * (0..9999) with the last line's text, or an error with a message, and never read beyond
 * its buffers or hang (every wait has the deadline).
 */
#include "../../src/cluster/bird.c"

#include "fuzz.h"

static void count_cb(int code, const char *text, void *ctx)
{
	FUZZ_CHECK(code >= 0 && code <= 9999 && text != NULL);
	(*(unsigned *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	/* A socket pair's buffer holds far more than this; larger inputs add nothing. */
	if (size > 16384 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 0;
	FUZZ_CHECK(write(sv[1], data, size) == (ssize_t)size);
	close(sv[1]);
	bird_conn_t c = {.fd = sv[0],
	                 .deadline = bird_now_ms() + 1000,
	                 .path = "fuzz",
	                 .command = "show status"};
	char last[BIRD_LINE_MAX], err[256] = "";
	unsigned lines = 0;
	for (int reply = 0; reply < 4; reply++) {
		int code =
		    bird_read_reply(&c, count_cb, &lines, last, sizeof(last), err, sizeof(err));
		if (code < 0) {
			FUZZ_CHECK(err[0] != '\0');
			break;
		}
		FUZZ_CHECK(code <= 9999 && memchr(last, '\0', sizeof(last)) != NULL);
	}
	close(sv[0]);
	return 0;
}
