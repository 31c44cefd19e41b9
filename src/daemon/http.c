/*
 * Wiring of the HTTP front end (see http.h): configuration to ctl_http_opts_t, the token file,
 * start, reload and stop. The server itself lives in ctl/http.c.
 */
#include "daemon/http.h"

#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "daemon/commands.h"
#include "daemon/server.h"

int server_http_token(const conf_t *conf, char *token, size_t size, char *err, size_t errlen)
{
	token[0] = '\0';
	if (conf->http.n_listen == 0 || conf->http.token_file == NULL)
		return 0;
	return ctl_http_token_read(conf->http.token_file, token, size, err, errlen);
}

int server_http_start(server_t *s)
{
	const conf_http_t *h = &s->boot_conf->http;
	if (h->n_listen == 0)
		return 0;
	char err[512] = "";
	char token[CTL_HTTP_TOKEN_MAX + 1];
	int ret = server_http_token(s->boot_conf, token, sizeof(token), err, sizeof(err));
	if (ret == 0) {
		ctl_http_opts_t opts = {.listen = h->listen,
		                        .n_listen = h->n_listen,
		                        .token = token,
		                        .read_only_open = h->read_only_open};
		ret =
		    ctl_http_start(&s->http, s->loop, &opts, commands_backend(s), err, sizeof(err));
	}
	explicit_bzero(token, sizeof(token));
	if (ret != 0) {
		log_err("%s", err);
		return ret;
	}
	if (h->token_file == NULL)
		log_notice(
		    "http: no token-file: calls that change the server are refused over HTTP");
	return 0;
}

void server_http_reconfigure(server_t *s, const conf_t *conf, const char *token)
{
	if (s->http == NULL)
		return;
	ctl_http_opts_t opts = {.token = token, .read_only_open = conf->http.read_only_open};
	ctl_http_reconfigure(s->http, &opts);
}

void server_http_stop(server_t *s)
{
	ctl_http_stop(s->http);
	s->http = NULL;
}
