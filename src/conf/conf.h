/*
 * Configuration: one declarative schema table (conf_schema.c) drives YAML parsing, validation,
 * defaults and the generated reference (docs/configuration.md). The result is an immutable
 * conf_t built on the control thread and swapped as a whole on reload.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/compiler.h"
#include "base/log.h"
#include "base/sockaddr.h"

typedef struct {
	char *domain;              /* presentation form as configured */
	char *file;                /* zone file path, resolved against the config file's folder */
	steer_prefix_t *xfr_allow; /* who may AXFR; empty means nobody */
	size_t n_xfr_allow;
} conf_zone_t;

typedef struct {
	char *path; /* the config file, NULL in quick mode (command-line zones) */

	/* server: */
	steer_sockaddr_t *listen; /* UDP and TCP listen addresses */
	size_t n_listen;
	bool listen_is_default;    /* still the built-in default: conf_add_listen() replaces it */
	unsigned workers;          /* UDP worker threads; 0 = one per CPU */
	unsigned tcp_workers;      /* TCP event-loop threads; 0 = one per CPU, at most 4 */
	uint16_t udp_max_payload;  /* our EDNS UDP payload ceiling (512..4096, default 1232) */
	unsigned tcp_max_clients;  /* open TCP connections across all TCP threads */
	unsigned tcp_idle_timeout; /* ms a connection may sit between queries */
	unsigned tcp_io_timeout;   /* ms to receive a whole message once it started */
	char *user;                /* drop privileges to this user after binding; NULL = stay */
	char *group;               /* and this group; NULL = the user's primary group */
	char *control_socket;      /* UNIX socket path for steerctl */
	char *pid_file;            /* NULL = none */

	/* log: */
	log_target_t log_target;
	log_level_t log_level;

	conf_zone_t *zones;
	size_t n_zones;
} conf_t;

/** A configuration with every default and no zones (quick mode starts from this). */
conf_t *conf_new_default(void);

/**
 * Parse and validate the YAML file @p path. On error returns STEER_ECONF and writes
 * "file:line: message" into @p err. Unknown keys are errors. Control thread only.
 */
int conf_load_file(const char *path, conf_t **out, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/**
 * Add a listen address given as "1.2.3.4:53" or "[::1]:53" (quick mode); default port 53.
 * Returns 0 or STEER_EINVAL with a message in @p err.
 */
int conf_add_listen(conf_t *conf, const char *text, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Add a zone given as "example.test=path/to/file" (quick mode). Returns 0 or STEER_EINVAL. */
int conf_add_zone_arg(conf_t *conf, const char *arg, char *err, size_t errlen)
    STEER_NONNULL(1, 2, 3) STEER_WUR;

/** Final checks shared by both modes (at least one listen address and zone, ...). */
int conf_validate(const conf_t *conf, char *err, size_t errlen) STEER_NONNULL(1, 2) STEER_WUR;

/** The zone config for @p domain (case-insensitive, trailing dot optional), or NULL. */
const conf_zone_t *conf_find_zone(const conf_t *conf, const char *domain) STEER_NONNULL(1, 2);

/**
 * Names of settings that differ between @p old and @p new but only take effect on restart
 * (listen, workers, user, ...), comma-separated into @p buf; empty when none.
 */
void conf_restart_only_changes(const conf_t *old, const conf_t *new, char *buf, size_t size)
    STEER_NONNULL(1, 2, 3);

/** Write the configuration reference (Markdown) generated from the schema table. */
void conf_write_reference(FILE *out) STEER_NONNULL(1);

/** Free a configuration. NULL is ignored. */
void conf_free(conf_t *conf);
