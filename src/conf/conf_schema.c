/*
 * The configuration schema: every section and key Steer accepts, with type, bounds, default,
 * reload behaviour and documentation. conf.c parses and validates by walking this table and
 * conf_write_reference() turns it into docs/configuration.md, so the docs cannot drift from the
 * parser (a unit test compares them). Pure data plus one printer; no threads involved.
 */
#include "conf/conf_int.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SERVER_UINT(key, field, lo, hi, dflt, fl, text)                                            \
	{                                                                                          \
		.section = "server", .name = key, .type = CONF_TYPE_UINT,                          \
		.offset = offsetof(conf_t, field), .size = sizeof(((conf_t *)0)->field),           \
		.min = lo, .max = hi, .def = dflt, .flags = fl, .doc = text                        \
	}

static const conf_enum_t log_targets[] = {
    {"stderr", LOG_TARGET_STDERR},
    {"syslog", LOG_TARGET_SYSLOG},
    {NULL, 0},
};

static const conf_enum_t log_levels[] = {
    {"error", LOG_LEVEL_ERR}, {"warning", LOG_LEVEL_WARNING}, {"notice", LOG_LEVEL_NOTICE},
    {"info", LOG_LEVEL_INFO}, {"debug", LOG_LEVEL_DEBUG},     {NULL, 0},
};

/* sun_path holds 108 bytes including the terminating NUL. */
#define UNIX_PATH_MAXLEN 107

const conf_section_t conf_sections[] = {
    {"server", false, 0, "Listening sockets, threads, limits and process settings."},
    {"log", false, 0, "Where log messages go and how many."},
    {"zones", true, CONF_F_REQUIRED | CONF_F_NONEMPTY,
     "The zones to serve: a list with one mapping per zone. At least one zone is required. "
     "Zone files are re-read on reload only when they changed."},
};
const size_t conf_n_sections = sizeof(conf_sections) / sizeof(conf_sections[0]);

const conf_key_t conf_keys[] = {
    {.section = "server",
     .name = "listen",
     .type = CONF_TYPE_ADDR_LIST,
     .offset = offsetof(conf_t, listen),
     .size = offsetof(conf_t, n_listen),
     .def = "127.0.0.1:53",
     .flags = CONF_F_RESTART | CONF_F_NONEMPTY,
     .doc =
         "Addresses to answer DNS queries on, over both UDP and TCP. Write `IP:PORT`; IPv6 "
         "addresses go in brackets and must be quoted in YAML (`\"[::1]:53\"`); the port is 53 "
         "when omitted. A wildcard address (`0.0.0.0`, `\"[::]\"`) works: replies leave from the "
         "address each query arrived at. The default only listens on loopback, so a fresh "
         "install is not an open server by accident."},
    SERVER_UINT("workers", workers, 0, 256, "0", CONF_F_RESTART,
                "UDP worker threads; each has its own `SO_REUSEPORT` socket per listen address. "
                "`0` starts one per CPU."),
    SERVER_UINT("tcp-workers", tcp_workers, 0, 64, "0", CONF_F_RESTART,
                "TCP event-loop threads. `0` starts one per CPU, at most 4."),
    SERVER_UINT(
        "udp-max-payload", udp_max_payload, 512, 4096, "1232", 0,
        "Largest UDP reply in bytes when the client advertises EDNS(0) (RFC 6891); "
        "larger answers are truncated (TC=1) so the client retries over TCP. 1232 avoids IP "
        "fragmentation on virtually every path (DNS Flag Day 2020)."),
    SERVER_UINT("tcp-max-clients", tcp_max_clients, 1, 1000000, "1000", 0,
                "Open TCP connections allowed across all TCP threads; further connections are "
                "closed at once."),
    SERVER_UINT("tcp-idle-timeout", tcp_idle_timeout, 100, 3600000, "10000", 0,
                "Milliseconds a TCP connection may sit idle between queries before it is closed "
                "(RFC 7766)."),
    SERVER_UINT("tcp-io-timeout", tcp_io_timeout, 100, 600000, "2000", 0,
                "Milliseconds allowed to receive the rest of a TCP message once its first byte "
                "arrived, so slow or stalled clients cannot hold connections."),
    {.section = "server",
     .name = "user",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, user),
     .flags = CONF_F_RESTART,
     .doc = "Drop privileges to this user after binding the sockets. Unset: keep running as the "
            "user that started `steerd`."},
    {.section = "server",
     .name = "group",
     .type = CONF_TYPE_STRING,
     .offset = offsetof(conf_t, group),
     .flags = CONF_F_RESTART,
     .doc = "Group to switch to together with `user`. Unset: the user's primary group. Members "
            "of this group may use the control socket."},
    {.section = "server",
     .name = "control-socket",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, control_socket),
     .max = UNIX_PATH_MAXLEN,
     .def = "/run/steer/steerd.sock",
     .flags = CONF_F_RESTART,
     .doc = "UNIX socket that `steerctl` talks to (mode 0660: root and the daemon's group). At "
            "most 107 bytes long, the limit of a UNIX socket address."},
    {.section = "server",
     .name = "pid-file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_t, pid_file),
     .flags = CONF_F_RESTART,
     .doc = "Write the daemon's process id to this file. Unset: no pid file."},
    {.section = "log",
     .name = "target",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_t, log_target),
     .enums = log_targets,
     .def = "stderr",
     .doc = "`stderr` writes one line per message with a systemd priority prefix (`<6>`), which "
            "journald understands; `syslog` sends to the local syslog daemon (facility daemon)."},
    {.section = "log",
     .name = "level",
     .type = CONF_TYPE_ENUM,
     .offset = offsetof(conf_t, log_level),
     .enums = log_levels,
     .def = "info",
     .doc = "Least severe messages that are logged. Messages on the query path are also rate "
            "limited whatever the level."},
    {.section = "zones",
     .name = "domain",
     .type = CONF_TYPE_DNAME,
     .offset = offsetof(conf_zone_t, domain),
     .flags = CONF_F_REQUIRED,
     .doc = "The zone's apex, e.g. `example.com` (trailing dot optional). Each zone may be "
            "listed once; a zone and its parent may both be served, the longest match wins."},
    {.section = "zones",
     .name = "file",
     .type = CONF_TYPE_PATH,
     .offset = offsetof(conf_zone_t, file),
     .flags = CONF_F_REQUIRED,
     .doc = "Zone file in RFC 1035 master format. A file with an error is refused with its "
            "`file:line` and, on reload, the previous version of the zone keeps serving."},
    {.section = "zones",
     .name = "xfr-allow",
     .type = CONF_TYPE_PREFIX_LIST,
     .offset = offsetof(conf_zone_t, xfr_allow),
     .size = offsetof(conf_zone_t, n_xfr_allow),
     .doc = "Clients allowed to transfer the zone with AXFR over TCP: addresses or prefixes "
            "such as `192.0.2.1`, `10.0.0.0/8`, `\"2001:db8::/32\"`. Host bits beyond the prefix "
            "length are an error, which catches typos. Unset or empty: nobody."},
};
const size_t conf_n_keys = sizeof(conf_keys) / sizeof(conf_keys[0]);

static const char reference_intro[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated from src/conf/conf_schema.c by `steerd --config-reference`. Do not edit: a "
    "unit test fails when this file and the schema differ. -->\n"
    "\n"
    "Steer reads one YAML file: `steerd -c /etc/steer/steer.yaml`. "
    "`steerd -c FILE --check-config` runs the same parser and checks, prints errors as "
    "`FILE:LINE: message` and exits 0 (valid) or 1.\n"
    "\n"
    "- Unknown sections and keys are errors, so a typo never silently falls back to a "
    "default.\n"
    "- Relative paths are resolved against the folder that holds the configuration file.\n"
    "- Settings applied *on restart* keep their running value on reload (`SIGHUP` or "
    "`steerctl reload`); the reload reports them in `restart_needed`. All others take effect "
    "on reload.\n"
    "- Without a configuration file, `steerd --listen ADDR --zone DOMAIN=FILE` (both "
    "repeatable) serves zones with these defaults.\n"
    "\n"
    "A complete example:\n"
    "\n"
    "```yaml\n"
    "server:\n"
    "  listen: [127.0.0.1:5353, \"[::1]:5353\"]\n"
    "  workers: 2\n"
    "  user: steer\n"
    "  group: steer\n"
    "log:\n"
    "  target: stderr\n"
    "  level: info\n"
    "zones:\n"
    "  - domain: example.test\n"
    "    file: zones/example.test.zone\n"
    "    xfr-allow: [127.0.0.1, 10.0.0.0/8]\n"
    "```\n";

static const char *type_text(const conf_key_t *key)
{
	switch (key->type) {
	case CONF_TYPE_UINT:
		return "unsigned integer";
	case CONF_TYPE_STRING:
		return "string";
	case CONF_TYPE_PATH:
		return "path";
	case CONF_TYPE_ENUM:
		return "one of";
	case CONF_TYPE_DNAME:
		return "domain name";
	case CONF_TYPE_ADDR_LIST:
		return "list of addresses (a single address is accepted too)";
	case CONF_TYPE_PREFIX_LIST:
		return "list of address prefixes (a single prefix is accepted too)";
	}
	return "?";
}

static void write_type(FILE *out, const conf_key_t *key)
{
	fprintf(out, "- Type: %s", type_text(key));
	if (key->type == CONF_TYPE_UINT)
		fprintf(out, ", %u to %u", key->min, key->max);
	if (key->type == CONF_TYPE_ENUM) {
		for (const conf_enum_t *e = key->enums; e->name; e++)
			fprintf(out, "%s`%s`", e == key->enums ? " " : ", ", e->name);
	}
	if ((key->type == CONF_TYPE_PATH || key->type == CONF_TYPE_STRING) && key->max)
		fprintf(out, ", at most %u bytes", key->max);
	fputc('\n', out);
}

static void write_key(FILE *out, const conf_key_t *key)
{
	fprintf(out, "\n### `%s.%s`\n\n%s\n\n", key->section, key->name, key->doc);
	write_type(out, key);
	if (key->def)
		fprintf(out, "- Default: `%s`\n", key->def);
	else if (key->flags & CONF_F_REQUIRED)
		fprintf(out, "- Required\n");
	else
		fprintf(out, "- Default: unset\n");
	fprintf(out, "- Applies: %s\n", key->flags & CONF_F_RESTART ? "on restart" : "on reload");
}

void conf_write_reference(FILE *out)
{
	fputs(reference_intro, out);
	for (size_t s = 0; s < conf_n_sections; s++) {
		const conf_section_t *sec = &conf_sections[s];
		fprintf(out, "\n## `%s`\n\n%s\n", sec->name, sec->doc);
		for (size_t k = 0; k < conf_n_keys; k++) {
			if (strcmp(conf_keys[k].section, sec->name) == 0)
				write_key(out, &conf_keys[k]);
		}
	}
}
