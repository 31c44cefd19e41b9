/*
 * Fuzz target: the configuration loader (YAML through libyaml, then our schema walk, the GSLB
 * and monitor sections and conf_validate). The input is written to a memfd and loaded through
 * /proc/self/fd like a file. Besides sanitizer findings (leaks included: every error path must
 * free what it built) it checks that a failure produces no configuration and a message that
 * names the file, and that an accepted configuration resolves every monitor and datacenter
 * reference to an index in range.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf/conf.h"
#include "fuzz.h"

static void check_refs(const conf_t *c)
{
	for (size_t i = 0; i < c->paths.n_agents; i++)
		FUZZ_CHECK(c->paths.agents[i].datacenter < c->n_datacenters);
	for (size_t i = 0; i < c->n_datacenters; i++)
		FUZZ_CHECK(c->datacenters[i].monitor == CONF_MONITOR_NONE ||
		           c->datacenters[i].monitor < c->n_monitors);
	for (size_t i = 0; i < c->n_services; i++) {
		const conf_service_t *s = &c->services[i];
		FUZZ_CHECK(s->monitor == CONF_MONITOR_NONE || s->monitor < c->n_monitors);
		FUZZ_CHECK(s->map == SIZE_MAX || s->map < c->n_maps);
		for (size_t j = 0; j < s->n_dcs; j++) {
			FUZZ_CHECK(s->dcs[j].datacenter < c->n_datacenters);
			FUZZ_CHECK(s->dcs[j].monitor == CONF_MONITOR_NONE ||
			           s->dcs[j].monitor < c->n_monitors);
		}
	}
	for (size_t i = 0; i < c->n_monitors; i++)
		FUZZ_CHECK(c->monitors[i].timeout < c->monitors[i].interval);
	/* what the forwarder's engine takes without a second look */
	const conf_forward_t *f = &c->forward;
	FUZZ_CHECK(f->n_allow_recursion == 0 || f->n_groups > 0);
	FUZZ_CHECK(f->cache_min_ttl <= f->cache_max_ttl && f->cache_max_size >= 1u << 20);
	FUZZ_CHECK(c->n_zones > 0 || f->n_groups > 0);
	for (size_t g = 0; g < f->n_groups; g++) {
		const conf_fwd_group_t *grp = &f->groups[g];
		size_t len = grp->domain ? strlen(grp->domain) : 0;
		FUZZ_CHECK(len > 0 && grp->domain[len - 1] == '.' && grp->policy);
		FUZZ_CHECK(grp->n_upstreams >= 1 && grp->n_upstreams <= 64);
		FUZZ_CHECK(grp->probe_timeout < grp->probe_interval && grp->probe_fall >= 1 &&
		           grp->probe_rise >= 1);
		for (size_t u = 0; u < grp->n_upstreams; u++) {
			const conf_upstream_t *up = &grp->upstreams[u];
			FUZZ_CHECK(up->name && up->address.sa.sa_family != 0);
			FUZZ_CHECK(up->source.sa.sa_family == 0 ||
			           up->source.sa.sa_family == up->address.sa.sa_family);
		}
	}
	/* what the cluster thread and the keeper take without a second look */
	const conf_cluster_t *cc = &c->cluster;
	if (!cc->enabled)
		return;
	FUZZ_CHECK(cc->node_id && cc->n_service >= 1 && cc->n_service <= 64);
	FUZZ_CHECK(cc->check_timeout < cc->check_interval && cc->check_fall >= 1 &&
	           cc->check_rise >= 1);
	FUZZ_CHECK(cc->liveness_timeout > 2 * cc->check_interval && cc->liveness_timeout <= 10000);
	FUZZ_CHECK(cc->drain_quiet < cc->drain_timeout);
	FUZZ_CHECK(cc->announce != CONF_ANNOUNCE_BIRD || cc->bird_protocol);
	FUZZ_CHECK(cc->interface || cc->announce == CONF_ANNOUNCE_KEEPALIVED);
	FUZZ_CHECK(cc->frr_table != 0 && cc->frr_table != 255);
	FUZZ_CHECK(cc->unicast4.sa.sa_family == 0 || cc->unicast4.sa.sa_family == AF_INET);
	FUZZ_CHECK(cc->unicast6.sa.sa_family == 0 || cc->unicast6.sa.sa_family == AF_INET6);
	FUZZ_CHECK(conf_identity(c) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("steer.yaml", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
	char path[64], err[4096];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	conf_t *c = NULL;
	int ret = conf_load_file(path, &c, err, sizeof(err));
	if (ret == 0) {
		FUZZ_CHECK(c != NULL);
		check_refs(c);
		conf_free(c);
	} else {
		FUZZ_CHECK(c == NULL);
		FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0);
	}
	close(fd);
	return 0;
}
