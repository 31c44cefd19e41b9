/*
 * Internal to src/conf: the schema table (conf_schema.c) and the types that describe it. The
 * parser (conf.c) and the reference generator only walk this table, so adding a setting means
 * adding one row here, one field in conf_t and one test.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"

typedef enum {
	CONF_TYPE_UINT,        /* unsigned or uint16_t (see size), bounded by min..max */
	CONF_TYPE_STRING,      /* char *, non-empty */
	CONF_TYPE_PATH,        /* char *, relative paths resolved against the config folder */
	CONF_TYPE_ENUM,        /* int-sized enum, names in enums[] */
	CONF_TYPE_DNAME,       /* char *, a domain name kept as written, validated */
	CONF_TYPE_ADDR_LIST,   /* steer_sockaddr_t array + size_t count */
	CONF_TYPE_PREFIX_LIST, /* steer_prefix_t array + size_t count */
} conf_type_t;

/* Key flags. */
#define CONF_F_RESTART  0x1 /* a changed value only takes effect on restart */
#define CONF_F_REQUIRED 0x2 /* must be present (only meaningful without a default) */
#define CONF_F_NONEMPTY 0x4 /* lists: an explicitly empty list is an error */

typedef struct {
	const char *name;
	int value;
} conf_enum_t;

typedef struct {
	const char *section; /* "server", "log" or "zones" (a key of one item of the list) */
	const char *name;    /* as written in YAML */
	conf_type_t type;
	size_t offset;     /* of the value in conf_t, or in conf_zone_t for "zones" */
	size_t size;       /* UINT: sizeof the field; lists: offset of the size_t count */
	unsigned min, max; /* UINT bounds; STRING/PATH: max is the longest length (0 = any) */
	const conf_enum_t *enums; /* ENUM: terminated by a NULL name */
	const char *def;          /* default in YAML text (lists: space-separated), NULL = none */
	unsigned flags;           /* CONF_F_* */
	const char *doc;          /* Markdown, one paragraph */
} conf_key_t;

typedef struct {
	const char *name;
	bool is_list;   /* a sequence of mappings (zones) rather than one mapping */
	unsigned flags; /* CONF_F_REQUIRED, CONF_F_NONEMPTY */
	const char *doc;
} conf_section_t;

extern const conf_section_t conf_sections[];
extern const size_t conf_n_sections;
extern const conf_key_t conf_keys[];
extern const size_t conf_n_keys;
