/*
 * Domain names in uncompressed wire form (length-prefixed labels ending with the root label).
 * "Lowercase" means ASCII letters folded; other octets are kept (RFC 4343). Pure functions.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compiler.h"
#include "dns/const.h"

/**
 * Read a possibly compressed name at @p *offset of message @p msg into @p out, uncompressed.
 * Pointers must point backwards (which also rules out loops); labels longer than 63 octets,
 * names longer than 255 and extended label types are rejected. On success advances @p *offset
 * past the name as it sits in the message and returns the wire length of @p out; otherwise
 * returns STEER_EMALF or STEER_ETRUNC.
 */
int dname_unpack(const uint8_t *msg, size_t msglen, size_t *offset, uint8_t out[DNS_DNAME_MAXLEN])
    STEER_NONNULL(1, 3, 4) STEER_WUR;

/** dname_unpack() that also folds ASCII letters to lowercase as it copies (one pass). */
int dname_unpack_lower(const uint8_t *msg, size_t msglen, size_t *offset,
                       uint8_t out[DNS_DNAME_MAXLEN]) STEER_NONNULL(1, 3, 4) STEER_WUR;

/** Length of a valid uncompressed name, root label included. */
size_t dname_len(const uint8_t *name) STEER_NONNULL(1);

/** Check that @p len bytes at @p name are exactly one valid uncompressed name. */
bool dname_is_valid(const uint8_t *name, size_t len) STEER_NONNULL(1);

/** Fold ASCII letters to lowercase in place. */
void dname_lower(uint8_t *name) STEER_NONNULL(1);

/** Case-insensitive equality of two valid names. */
bool dname_equal(const uint8_t *a, const uint8_t *b) STEER_NONNULL(1, 2);

/** Number of labels, the root label not counted ("." has 0, "a.b." has 2). */
unsigned dname_labels(const uint8_t *name) STEER_NONNULL(1);

/** The parent name (first label removed); the root has no parent and returns NULL. */
const uint8_t *dname_parent(const uint8_t *name) STEER_NONNULL(1);

/** True when @p name equals @p parent or lies below it (case-insensitive). */
bool dname_is_subdomain(const uint8_t *name, const uint8_t *parent) STEER_NONNULL(1, 2);

/** True when the first label of @p name is "*". */
bool dname_is_wildcard(const uint8_t *name) STEER_NONNULL(1);

/**
 * Parse presentation format ("www.example.test", trailing dot optional, \DDD and \X escapes)
 * into @p out. Returns the wire length or STEER_ESYNTAX / STEER_ERANGE.
 */
int dname_from_str(const char *text, uint8_t out[DNS_DNAME_MAXLEN]) STEER_NONNULL(1, 2) STEER_WUR;

/**
 * Print @p name in presentation format with a trailing dot into @p buf; non-printable octets
 * and dots inside labels are escaped. Always NUL-terminates (truncates if @p size is small).
 */
char *dname_to_str(const uint8_t *name, char *buf, size_t size) STEER_NONNULL(1, 2);

/* Enough for the presentation form of any name, every octet escaped as \DDD. */
#define DNAME_STR_MAXLEN (DNS_DNAME_MAXLEN * 4 + 1)
