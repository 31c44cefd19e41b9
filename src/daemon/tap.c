/*
 * Wiring of the dnstap log: the configuration's message kinds become tap kinds, and the
 * writing threads (UDP worker sockets, TCP threads, the forwarder's engine) get their queues.
 */
#include "daemon/tap.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "daemon/server.h"

static const struct {
	unsigned conf_bit;
	tap_type_t type;
} kinds[] = {
    {CONF_DNSTAP_AUTH_QUERY, TAP_AUTH_QUERY},
    {CONF_DNSTAP_AUTH_RESPONSE, TAP_AUTH_RESPONSE},
    {CONF_DNSTAP_CLIENT_QUERY, TAP_CLIENT_QUERY},
    {CONF_DNSTAP_CLIENT_RESPONSE, TAP_CLIENT_RESPONSE},
    {CONF_DNSTAP_FORWARDER_QUERY, TAP_FORWARDER_QUERY},
    {CONF_DNSTAP_FORWARDER_RESPONSE, TAP_FORWARDER_RESPONSE},
};

static unsigned tap_messages(unsigned conf_bits)
{
	unsigned bits = 0;
	for (size_t i = 0; i < STEER_ARRAY_LEN(kinds); i++)
		if (conf_bits & kinds[i].conf_bit)
			bits |= TAP_BIT(kinds[i].type);
	return bits;
}

int server_tap_start(server_t *s, char *err, size_t errlen)
{
	const conf_dnstap_t *d = &s->conf->dnstap;
	s->tap = NULL;
	if (!d->enabled)
		return 0;
	char host[256] = "";
	const char *identity = conf_identity(s->conf);
	if (identity == NULL && gethostname(host, sizeof(host) - 1) == 0)
		identity = host;
	unsigned query_threads = net_query_threads(s->net);
	tap_opts_t opts = {.socket = d->socket,
	                   .file = d->file,
	                   .identity = identity,
	                   .version = "steerd " STEER_VERSION,
	                   .n_threads = query_threads + 1,
	                   .queue = d->queue,
	                   .messages = tap_messages(d->messages),
	                   .sample = d->sample};
	int ret = tap_new(&opts, &s->tap, err, errlen);
	if (ret != 0)
		return ret;
	net_set_tap(s->net, s->tap);
	if (s->fwd != NULL)
		fwd_engine_set_tap(s->fwd, tap_thread(s->tap, query_threads));
	log_info("dnstap: logging to %s %s, every %u%s query", d->socket ? "socket" : "file",
	         d->socket ? d->socket : d->file, d->sample ? d->sample : 1,
	         d->sample > 1 ? "th" : "");
	return 0;
}

void server_tap_stats(const server_t *s, tap_counters_t *out)
{
	memset(out, 0, sizeof(*out));
	if (s->tap != NULL)
		tap_stats(s->tap, out);
}

void server_tap_stop(server_t *s)
{
	tap_free(s->tap);
	s->tap = NULL;
}
