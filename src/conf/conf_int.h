/*
 * Internal to src/conf: the schema table (conf_schema.c), the types that describe it, and the
 * YAML-walking helpers shared by the generic loader (conf.c) and the GSLB sections
 * (conf_gslb.c). The parser and the reference generator only walk the table, so adding a
 * setting means adding one row here, one field in conf_t and one test. Control thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <yaml.h>

#include "base/compiler.h"
#include "conf/conf.h"

typedef enum {
	CONF_TYPE_UINT,        /* unsigned or uint16_t (see size), bounded by min..max */
	CONF_TYPE_STRING,      /* char *, non-empty */
	CONF_TYPE_PATH,        /* char *, relative paths resolved against the config folder */
	CONF_TYPE_ENUM,        /* int-sized enum (or bool when size is sizeof(bool)), enums[] */
	CONF_TYPE_DNAME,       /* char *, a domain name kept as written, validated */
	CONF_TYPE_ADDR_LIST,   /* steer_sockaddr_t array + size_t count */
	CONF_TYPE_PREFIX_LIST, /* steer_prefix_t array + size_t count */
	CONF_TYPE_BOOL,        /* bool: true or false */
	CONF_TYPE_NODE,        /* structured value parsed by the section's own code; type_doc */
	CONF_TYPE_DURATION,    /* unsigned or uint32_t in units of `unit`, bounded by min..max */
	CONF_TYPE_SIZE,        /* uint64_t bytes ("256M"), bounded by min..max counted in KiB */
} conf_type_t;

/* Base unit of a CONF_TYPE_DURATION field: what a bare number means, in milliseconds. */
typedef enum {
	CONF_UNIT_MS = 1,
	CONF_UNIT_S = 1000,
} conf_unit_t;

/* Key flags. */
#define CONF_F_RESTART  0x1 /* a changed value only takes effect on restart */
#define CONF_F_REQUIRED 0x2 /* must be present (only meaningful without a default) */
#define CONF_F_NONEMPTY 0x4 /* lists: an explicitly empty list is an error */
#define CONF_F_ALIAS    0x8 /* another name of the previous row's key: same field, same type */

#define CONF_F_EMPTY_OK 0x10 /* STRING: "" is a value of its own rather than an error */

typedef struct {
	const char *name;
	int value;
} conf_enum_t;

typedef struct {
	const char *section; /* "server", "zones", "services.datacenters", ... */
	const char *name;    /* as written in YAML */
	conf_type_t type;
	size_t offset; /* of the value in the section's struct (conf_t, conf_zone_t, ...) */
	size_t size;   /* UINT/ENUM/DURATION: sizeof the field; lists: offset of the size_t count */
	unsigned min, max; /* UINT/DURATION bounds (in `unit`); STRING/PATH: max is the longest
	                      length (0 = any) */
	const conf_enum_t *enums; /* ENUM: terminated by a NULL name; STRING: the only values
	                             accepted (case-insensitive, kept as written) */
	conf_unit_t unit;         /* DURATION: what a bare number counts */
	const char *def;          /* default in YAML text (lists: space-separated), NULL = none */
	unsigned flags;           /* CONF_F_* */
	const char *type_doc;     /* NODE: the value's shape for the reference */
	const char *doc;          /* Markdown, one paragraph */
} conf_key_t;

typedef struct conf_loader conf_loader_t;
typedef struct conf_section conf_section_t;

/* Loads a whole top-level section from its YAML value. */
typedef int (*conf_section_load_cb)(conf_loader_t *ld, const yaml_node_t *node);

struct conf_section {
	const char *name;
	bool is_list;   /* a sequence of mappings (zones) rather than one mapping */
	unsigned flags; /* CONF_F_REQUIRED, CONF_F_NONEMPTY */
	const char *doc;
	bool nested;               /* documents keys inside another section; not top level */
	conf_section_load_cb load; /* NULL: the generic loader (keys of conf_t, or zones) */
};

extern const conf_section_t conf_sections[];
extern const size_t conf_n_sections;
extern const conf_key_t conf_keys[];
extern const size_t conf_n_keys;

/* ---- loader state and helpers (conf.c) ---------------------------------------------------- */

struct conf_loader {
	const char *file; /* as given, for messages */
	FILE *in;
	char *dir; /* folder of file for relative paths; NULL = cwd */
	yaml_document_t *doc;
	conf_t *conf;
	size_t *zone_lines;  /* line of each zone's mapping, for duplicate messages */
	bool zones_optional; /* the file has a `forward` section: a forwarder needs no zones */
	char *err;
	size_t errlen;
};

/* Called by conf_load_keys() for each CONF_TYPE_NODE key found in the mapping. */
typedef int (*conf_node_cb)(conf_loader_t *ld, const conf_key_t *key, void *base,
                            const yaml_node_t *value, void *ctx);

/** Write "file:line: message" into the loader's error buffer; returns STEER_ECONF. */
int conf_fail(conf_loader_t *ld, size_t line, const char *fmt, ...) STEER_PRINTF(3, 4);

/** 1-based line where @p node starts. */
size_t conf_node_line(const yaml_node_t *node) STEER_NONNULL(1);

/** "a mapping", "a list", "a single value": for type errors. */
const char *conf_kind_name(const yaml_node_t *node) STEER_NONNULL(1);

/* Each item of a list of mappings: @p load fills the slot appended to @p owner's array. */
typedef int (*conf_item_load_cb)(conf_loader_t *ld, const yaml_node_t *item, void *owner);

/**
 * Load the list of mappings @p node (`what` names it in errors, `shape` shows an entry) by
 * calling @p load for each item; null or empty is allowed only with @p allow_empty. Returns
 * 0 or the first error (conf_fail()).
 */
int conf_load_mapping_list(conf_loader_t *ld, const char *what, const char *shape,
                           const yaml_node_t *node, bool allow_empty, conf_item_load_cb load,
                           void *owner) STEER_NONNULL(1, 2, 3, 4, 6);

/** True for a plain empty, "~" or "null" scalar. */
bool conf_is_null(const yaml_node_t *node) STEER_NONNULL(1);

/** The node with id @p id of the document being loaded. */
yaml_node_t *conf_node(conf_loader_t *ld, int id) STEER_NONNULL(1);

/** Text of mapping key @p key, or NULL with an error written (*@p ret = STEER_ECONF). */
const char *conf_key_text(conf_loader_t *ld, const yaml_node_t *key, int *ret)
    STEER_NONNULL(1, 2, 3);

/** STEER_ECONF when @p text was already a key of @p map before @p pair, else 0. */
int conf_check_duplicate_key(conf_loader_t *ld, const yaml_node_t *map,
                             const yaml_node_pair_t *pair, const char *text, const char *section)
    STEER_NONNULL(1, 2, 3, 4);

/* Called by conf_for_each_item() for each item; @p what names the list in messages. */
typedef int (*conf_item_cb)(conf_loader_t *ld, const char *what, const yaml_node_t *item,
                            void *ctx);

/**
 * Call @p cb for each item of list @p node; a single value is a one-item list, null an empty
 * one, an error ("WHAT: needs at least one value") unless @p allow_empty. A mapping is an
 * error. Stops at and returns the first non-zero value of @p cb.
 */
int conf_for_each_item(conf_loader_t *ld, const char *what, const yaml_node_t *node,
                       bool allow_empty, conf_item_cb cb, void *ctx) STEER_NONNULL(1, 2, 3, 5);

/**
 * The text of list item @p item of list @p what (named in messages): a single value without a
 * NUL byte, or NULL with the error written and *@p ret = STEER_ECONF.
 */
const char *conf_item_text(conf_loader_t *ld, const char *what, const yaml_node_t *item, int *ret)
    STEER_NONNULL(1, 2, 3, 4);

/* Called by conf_for_each_named() for each item: @p key is the name's node (for its line),
 * @p value a mapping. */
typedef int (*conf_named_cb)(conf_loader_t *ld, const char *name, const yaml_node_t *key,
                             const yaml_node_t *value, void *ctx);

/**
 * Walk a section that maps names to mappings (`maps`, `monitors`): null is empty; otherwise
 * it must be a mapping ("section 'SECTION' must be a mapping of WHAT, got ...") whose names
 * are unique and whose values are mappings ("SECTION.NAME: expected a mapping of keys (KEYS),
 * got ..."). Calls @p cb for each item in order; stops at its first non-zero return.
 */
int conf_for_each_named(conf_loader_t *ld, const char *section, const yaml_node_t *node,
                        const char *what, const char *keys, conf_named_cb cb, void *ctx)
    STEER_NONNULL(1, 2, 3, 4, 5, 6);

/**
 * The text of scalar @p node for key @p key (section.key in messages). A non-scalar, a null
 * or a NUL byte is an error (STEER_ECONF, *@p out untouched).
 */
int conf_scalar_text(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *node,
                     const char **out) STEER_NONNULL(1, 2, 3, 4);

/**
 * Load the keys of mapping @p map (already checked to be a mapping) as keys of @p section
 * into @p base: unknown and duplicate keys are errors, scalar and list keys go through the
 * generic value parsers, CONF_TYPE_NODE keys through @p cb, then required keys are checked.
 */
int conf_load_keys(conf_loader_t *ld, const char *section, void *base, const yaml_node_t *map,
                   conf_node_cb cb, void *ctx) STEER_NONNULL(1, 2, 3, 4);

/** Apply the table defaults of the scalar keys of @p section to @p base. */
void conf_apply_defaults(const char *section, void *base) STEER_NONNULL(1, 2);

/** Free the strings and lists of @p section's table keys in @p base. */
void conf_free_fields(const char *section, void *base) STEER_NONNULL(1, 2);

/** @p text resolved against @p dir (NULL = kept as is); caller frees. */
char *conf_resolve_path(const char *dir, const char *text) STEER_NONNULL(2);

/**
 * Write @p ms as a duration in the largest unit that divides it exactly ("90s", "1500ms",
 * "2h", "0s") into @p buf. Returns @p buf.
 */
const char *conf_duration_str(uint64_t ms, char *buf, size_t size) STEER_NONNULL(2);

/* Picks the candidate nearest to a mistyped word, for "did you mean" hints. */
typedef struct {
	const char *word;
	const char *best; /* NULL: nothing close enough */
	unsigned score;
} conf_suggest_t;

/** Start a search for the candidate nearest to @p word (which must outlive @p s). */
void conf_suggest_init(conf_suggest_t *s, const char *word) STEER_NONNULL(1, 2);

/**
 * Consider @p candidate: kept when it is within a small case-insensitive edit distance of the
 * word (none for words under 3 bytes, 1 under 6, else 2; a swap of neighbours counts 1) or
 * starts with the whole word (at least 4 bytes), and is closer than every earlier one.
 */
void conf_suggest_add(conf_suggest_t *s, const char *candidate) STEER_NONNULL(1, 2);

/**
 * Append " (did you mean 'BEST'?)" for the best candidate to @p buf (NUL-terminated, of
 * @p size bytes); nothing when there is none. Returns true when a hint was written.
 */
bool conf_suggest_hint(const conf_suggest_t *s, char *buf, size_t size) STEER_NONNULL(1, 2);

/** Line of key @p name in mapping @p map, or @p fallback when it is not there. */
size_t conf_key_line(conf_loader_t *ld, const yaml_node_t *map, const char *name, size_t fallback)
    STEER_NONNULL(1, 2, 3);

/** The schema row of @p section.@p name, or NULL. */
const conf_key_t *conf_find_key(const char *section, const char *name) STEER_NONNULL(1, 2);

/* ---- TSIG keys and access lists (conf_keys.c) --------------------------------------------- */

/* One item of `keys:` as written, before it becomes conf_tsig_key_t entries. */
typedef struct {
	char *name, *algorithm, *secret, *file;
} conf_key_item_t;

/** Section loader for `keys`. */
int conf_keys_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Free the keys of @p conf (secrets wiped) and reset them to empty. */
void conf_keys_free(conf_t *conf) STEER_NONNULL(1);

/**
 * Load an access list (`xfr-allow`, `notify-allow`; @p what names it in messages): items are
 * prefixes or mappings { address: PREFIX, key: NAME } (either or both), appended to *@p list.
 * Key names are checked later, by conf_keys_check_refs().
 */
int conf_acl_load(conf_loader_t *ld, const char *what, const yaml_node_t *node, conf_acl_t **list,
                  size_t *n) STEER_NONNULL(1, 2, 3, 4, 5);

/** Free an access list (NULL is fine). */
void conf_acl_free(conf_acl_t *acl, size_t n);

/** The CONF_TYPE_NODE keys of a zone (the access lists). */
int conf_zone_node(conf_loader_t *ld, const conf_key_t *key, void *base, const yaml_node_t *value,
                   void *ctx);

/** Free the access lists of zone @p z. */
void conf_zone_acl_free(conf_zone_t *z) STEER_NONNULL(1);

/** Every key a zone names (access lists, primaries, notify) must be configured: file:line. */
int conf_keys_check_refs(conf_loader_t *ld) STEER_NONNULL(1);

/* ---- GSLB sections (conf_gslb.c) ---------------------------------------------------------- */

/** Section loaders for datacenters, maps, services, whoami and gslb. */
int conf_gslb_load_datacenters(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_gslb_load_maps(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_gslb_load_services(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_gslb_load_whoami(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_gslb_load_gslb(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Free every GSLB field of @p conf and reset them to empty. */
void conf_gslb_free(conf_t *conf) STEER_NONNULL(1);

/* ---- caching forwarder (conf_forward.c) --------------------------------------------------- */

/** Section loader for `forward`. */
int conf_forward_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Free the forwarding groups and the `forward` keys of @p conf and reset them to empty. */
void conf_forward_free(conf_t *conf) STEER_NONNULL(1);

/**
 * Checks of the forward section that both modes share (allow-recursion needs groups). Returns
 * 0 or STEER_ECONF with a message in @p err.
 */
int conf_forward_validate(const conf_t *conf, char *err, size_t errlen) STEER_NONNULL(1, 2);

/**
 * Write @p bytes as a size in the largest unit that divides it exactly ("256M", "1G", "1500")
 * into @p buf. Returns @p buf.
 */
const char *conf_size_str(uint64_t bytes, char *buf, size_t size) STEER_NONNULL(2);

/* ---- health monitors (conf_health.c) ------------------------------------------------------ */

/** Section loader for `monitors`; must load before the GSLB sections that refer to monitors. */
int conf_health_load_monitors(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Resolve the monitor name in @p value (for @p key) to an index into conf_t.monitors. */
int conf_health_monitor_ref(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                            size_t *out) STEER_NONNULL(1, 2, 3, 4);

/** Likewise for a `metrics` key: the monitor must be of type metrics (the other must not). */
int conf_health_metrics_ref(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                            size_t *out) STEER_NONNULL(1, 2, 3, 4);

/** Validate a probe address ("IP", "IP:PORT", "[v6]:PORT") and replace *@p out with a copy. */
int conf_health_probe(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                      char **out) STEER_NONNULL(1, 2, 3, 4);

/** Append the target names of a `requires` list (or single value) to @p addr. */
int conf_health_requires(conf_loader_t *ld, const conf_key_t *key, const yaml_node_t *value,
                         conf_address_t *addr) STEER_NONNULL(1, 2, 3, 4);

/**
 * A datacenter's link monitor and probe go together; checked once the keys of its mapping
 * @p map are loaded (errors point at the key concerned).
 */
int conf_health_check_datacenter(conf_loader_t *ld, const conf_datacenter_t *dc,
                                 const yaml_node_t *map) STEER_NONNULL(1, 2, 3);

/** An address `probe` needs a monitor from its datacenter or service; checked per service. */
int conf_health_check_service(conf_loader_t *ld, const conf_service_t *svc) STEER_NONNULL(1, 2);

/** Free the probe and requires of @p addr (not @p addr itself) and reset them. */
void conf_health_address_free(conf_address_t *addr) STEER_NONNULL(1);

/** Free the monitors and the `health` keys of @p conf and reset them to empty. */
void conf_health_free(conf_t *conf) STEER_NONNULL(1);

/* ---- cluster node (conf_cluster.c) -------------------------------------------------------- */

/** Section loader for `cluster`. */
int conf_cluster_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/**
 * For restart-only reporting: true when the value of the CONF_TYPE_NODE key @p key of a
 * cluster section is the same in @p a and @p b. Mapping keys (bird, self-check, ...) are
 * always equal here: their own keys are compared one by one.
 */
bool conf_cluster_node_equal(const conf_key_t *key, const conf_cluster_t *a,
                             const conf_cluster_t *b) STEER_NONNULL(1, 2, 3);

/** Free the cluster fields of @p conf and reset them to empty. */
void conf_cluster_free(conf_t *conf) STEER_NONNULL(1);

/* ---- operations (conf_ops.c) ---------------------------------------------------------------- */

/** Section loaders for `http`, `dnstap`, `stats-snapshots`, `decision-log` and `alerts`. */
int conf_http_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_dnstap_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_snapshots_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_decision_log_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_alerts_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/**
 * For restart-only reporting: true when the CONF_TYPE_NODE key @p key of the `http` or
 * `dnstap` section (http.listen, dnstap.messages) has the same value in @p a and @p b.
 */
bool conf_ops_node_equal(const conf_key_t *key, const conf_t *a, const conf_t *b)
    STEER_NONNULL(1, 2, 3);

/** True when both configurations have the same alert destinations, in the same order. */
bool conf_alerts_equal(const conf_t *a, const conf_t *b) STEER_NONNULL(1, 2);

/** Free the operations fields of @p conf. */
void conf_ops_free(conf_t *conf) STEER_NONNULL(1);

/* ---- measured paths (conf_paths.c) ------------------------------------------------------- */

/** Section loader for `paths`; loads after the datacenters and zones it refers to. */
int conf_paths_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Free the `paths` fields of @p conf and reset them to empty. */
void conf_paths_free(conf_t *conf) STEER_NONNULL(1);

/* ---- peer addresses (conf_addr.c) ---------------------------------------------------------- */

/**
 * Parse a peer's address into @p out: "192.0.2.1", "192.0.2.1:5300", "192.0.2.1@5300",
 * "[2001:db8::1]:5300" or "2001:db8::1@5300" (the `@` form is BIND's and Knot's), port 53
 * when none is given, port 0 refused. Returns 0, or -1 with a message in @p msg.
 */
int conf_peer_address(const char *text, steer_sockaddr_t *out, char *msg, size_t len)
    STEER_NONNULL(1, 2, 3);

/**
 * Parse the local address queries to a peer leave from: an IP address without a port (each
 * query takes a random one). Returns 0, or -1 with a message in @p msg.
 */
int conf_source_address(const char *text, steer_sockaddr_t *out, char *msg, size_t len)
    STEER_NONNULL(1, 2, 3);

/* ---- zone transfers (conf_xfr.c) ------------------------------------------------------------ */

/** The CONF_TYPE_NODE keys of a zone: primaries, notify, notify-allow, max-records. */
int conf_xfr_zone_node(conf_loader_t *ld, const conf_key_t *key, void *base,
                       const yaml_node_t *value, void *ctx) STEER_NONNULL(1, 2, 3, 4);

/** Checks of one zone mapping @p map once its keys are loaded (a file or primaries). */
int conf_xfr_zone_check(conf_loader_t *ld, conf_zone_t *zone, const yaml_node_t *map)
    STEER_NONNULL(1, 2, 3);

/**
 * After every section is loaded: TSIG key names of primaries and notify targets must exist,
 * and a secondary zone without `file` is kept in <server.storage>/<domain>.zone.
 */
int conf_xfr_finish(conf_loader_t *ld) STEER_NONNULL(1);

/** Free the transfer fields (remotes, notify-allow) of @p zone and reset them. */
void conf_xfr_zone_free(conf_zone_t *zone) STEER_NONNULL(1);
/* ---- attack resistance (conf_hardening.c) ------------------------------------------------- */

/** Section loaders for `rrl` and `cookies`. */
int conf_rrl_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);
int conf_cookies_load(conf_loader_t *ld, const yaml_node_t *node) STEER_NONNULL(1, 2);

/** Set the `rrl` and `cookies` defaults in @p conf (a new configuration). */
void conf_hardening_defaults(conf_t *conf) STEER_NONNULL(1);

/** Free the `rrl` and `cookies` fields of @p conf and wipe the secrets. */
void conf_hardening_free(conf_t *conf) STEER_NONNULL(1);
