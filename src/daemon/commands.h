/*
 * Control-socket commands of steerd: status, reload, zones, stats. The reply shapes are the
 * contract with tools/steerctl.c and the integration tests. Control thread only.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

/**
 * The ctl_handler_cb of steerd; @p ctx is the server_t. Returns 0 with the reply's data in
 * @p data, or a negative steer_err with the message in @p err (unknown command, bad
 * arguments, failed reload).
 */
int commands_handle(const char *cmd, json_t *args, json_t **data, char *err, size_t errlen,
                    void *ctx);
