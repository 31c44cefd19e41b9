/*
 * The answers-per-service-per-datacenter counters of gslb/view: which slot a decision counts
 * in (a datacenter, none, fallback, all-down), what each slot is called, and the bank a
 * rebuilt view counts into (the other one than the view it replaces, so the old bank can be
 * carried over by name and cleared while the new one counts).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/const.h"
#include "dns/dname.h"
#include "gslb/view.h"
#include "unit.h"

static conf_datacenter_t dcs[] = {{.name = "east", .line = 2}, {.name = "west", .line = 3}};
static conf_address_t a_east[1], a_west[1], a_fb[1];
static conf_service_dc_t d_web[2], d_fb[1], d_sf[1];
static conf_service_t services[3];
static conf_override_t overrides[2];
static gslb_qstate_t qs;

static conf_address_t addr4(const char *text)
{
	conf_address_t a = {.family = AF_INET, .weight = 1};
	if (inet_pton(AF_INET, text, a.addr) != 1)
		abort();
	return a;
}

static conf_service_t service(const char *name, conf_service_dc_t *d, size_t n,
                              const char *all_down)
{
	return (conf_service_t){.name = (char *)name,
	                        .policy = "failover",
	                        .map = SIZE_MAX,
	                        .ttl = 30,
	                        .dcs = d,
	                        .n_dcs = n,
	                        .all_down = (char *)all_down,
	                        .monitor = CONF_MONITOR_NONE,
	                        .line = 10};
}

/* web: east then west; fb: east with fallback addresses; sf: west, servfail when down. */
static void init_conf(conf_t *c)
{
	memset(c, 0, sizeof(*c));
	c->path = "answers.yaml";
	c->datacenters = dcs;
	c->n_datacenters = 2;
	a_east[0] = addr4("192.0.2.1");
	a_west[0] = addr4("192.0.2.2");
	a_fb[0] = addr4("192.0.2.99");
	d_web[0] = (conf_service_dc_t){
	    .datacenter = 0, .addresses = a_east, .n_addresses = 1, .monitor = CONF_MONITOR_NONE};
	d_web[1] = (conf_service_dc_t){
	    .datacenter = 1, .addresses = a_west, .n_addresses = 1, .monitor = CONF_MONITOR_NONE};
	d_fb[0] = d_web[0];
	d_sf[0] = d_web[1];
	services[0] = service("web.example.test.", d_web, 2, NULL);
	services[1] = service("fb.example.test.", d_fb, 1, "fallback");
	services[1].fallback = a_fb;
	services[1].n_fallback = 1;
	services[2] = service("sf.example.test.", d_sf, 1, "servfail");
	c->services = services;
	c->n_services = 3;
}

static void ask(const gslb_view_t *v, const char *name, uint16_t qtype)
{
	uint8_t wire[DNS_DNAME_MAXLEN];
	if (dname_from_str(name, wire) < 0)
		abort();
	dname_lower(wire);
	const gslb_name_t *n = gslb_view_find(v, wire);
	CHECK(n != NULL, "%s is a GSLB name", name);
	if (!n)
		return;
	steer_sockaddr_t res = {.sin = {.sin_family = AF_INET}};
	inet_pton(AF_INET, "198.51.100.7", &res.sin.sin_addr);
	gslb_client_t client = {.resolver = &res, .ecs = NULL};
	gslb_result_t r;
	gslb_view_answer(v, n, qtype, &client, &qs, &r);
}

/* The slot counting @p service / @p dc in @p v, or -1. */
static long slot_of(const gslb_view_t *v, const char *service, const char *dc)
{
	for (size_t i = 0; i < gslb_view_answer_slots(v); i++) {
		const char *s, *d;
		gslb_view_answer_slot(v, i, &s, &d);
		if (strcmp(s, service) == 0 && strcmp(d, dc) == 0)
			return (long)i;
	}
	return -1;
}

static uint64_t count(const gslb_view_t *v, const char *service, const char *dc)
{
	long i = slot_of(v, service, dc);
	CHECK(i >= 0, "slot %s/%s exists", service, dc);
	return i < 0 ? 0 : qs.answers.slot[gslb_view_answer_bank(v)][i];
}

static gslb_view_t *build(const conf_t *c, const gslb_view_t *running)
{
	gslb_view_build_opts_t opts = {.running = running};
	gslb_view_t *v = NULL;
	char err[512] = "";
	int ret = gslb_view_build(c, &opts, &v, NULL, err, sizeof(err));
	CHECK(ret == 0, "build: %s", err);
	if (ret != 0)
		exit(unit_finish("gslb_answers"));
	return v;
}

static void test_slots_and_counts(void)
{
	conf_t c;
	init_conf(&c);
	gslb_view_t *v = build(&c, NULL);
	CHECK(gslb_view_answer_slots(v) == (2 + 3) + (1 + 3) + (1 + 3), "slots: %zu",
	      gslb_view_answer_slots(v));
	CHECK(gslb_view_answer_bank(v) == 0, "a first build counts into bank 0");
	static const struct {
		const char *service, *dc;
	} names[] = {
	    {"web.example.test.", "east"},     {"web.example.test.", "west"},
	    {"web.example.test.", "none"},     {"web.example.test.", "fallback"},
	    {"web.example.test.", "all-down"}, {"fb.example.test.", "east"},
	    {"sf.example.test.", "west"},      {"sf.example.test.", "all-down"},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(slot_of(v, names[i].service, names[i].dc) >= 0, "slot %s/%s",
		      names[i].service, names[i].dc);
	CHECK(slot_of(v, "web.example.test.", "nowhere") < 0, "no slot for an unknown DC");

	for (int i = 0; i < 3; i++)
		ask(v, "web.example.test", DNS_TYPE_A);
	ask(v, "web.example.test", DNS_TYPE_AAAA); /* no IPv6 address anywhere: none */
	ask(v, "web.example.test", DNS_TYPE_TXT);  /* not a decision: not counted */
	ask(v, "fb.example.test", DNS_TYPE_A);
	CHECK(count(v, "web.example.test.", "east") == 3, "web east: %llu",
	      (unsigned long long)count(v, "web.example.test.", "east"));
	CHECK(count(v, "web.example.test.", "west") == 0, "web west unused");
	CHECK(count(v, "web.example.test.", "none") == 1, "web none: %llu",
	      (unsigned long long)count(v, "web.example.test.", "none"));
	CHECK(count(v, "fb.example.test.", "east") == 1, "fb east");
	gslb_view_free(v);

	/* Everything forced down: web fails over to nothing (first-datacenter answers east
	 * anyway, an all-down answer), fb gives its fallback, sf SERVFAIL. */
	overrides[0] = (conf_override_t){.pattern = "service/*", .up = false, .line = 40};
	c.overrides = overrides;
	c.n_overrides = 1;
	memset(&qs, 0, sizeof(qs));
	v = build(&c, NULL);
	ask(v, "web.example.test", DNS_TYPE_A);
	ask(v, "fb.example.test", DNS_TYPE_A);
	ask(v, "fb.example.test", DNS_TYPE_A);
	ask(v, "sf.example.test", DNS_TYPE_A);
	CHECK(count(v, "web.example.test.", "all-down") == 1, "web all-down: %llu",
	      (unsigned long long)count(v, "web.example.test.", "all-down"));
	CHECK(count(v, "web.example.test.", "east") == 0, "all-down answers are not east's");
	CHECK(count(v, "fb.example.test.", "fallback") == 2, "fb fallback: %llu",
	      (unsigned long long)count(v, "fb.example.test.", "fallback"));
	CHECK(count(v, "sf.example.test.", "all-down") == 1, "sf all-down");
	gslb_view_free(v);
}

/* A rebuilt view counts into the other bank, so the old one is final after the swap; views
 * derived for health changes keep their build's bank. Reordered services get new slots. */
static void test_banks(void)
{
	conf_t c;
	init_conf(&c);
	memset(&qs, 0, sizeof(qs));
	gslb_view_t *v0 = build(&c, NULL);
	ask(v0, "sf.example.test", DNS_TYPE_A);
	conf_service_t swapped = services[0];
	services[0] = services[2];
	services[2] = swapped;
	gslb_view_t *v1 = build(&c, v0);
	CHECK(gslb_view_answer_bank(v1) == 1, "the rebuild counts into bank 1");
	gslb_view_t *v2 = build(&c, v1);
	CHECK(gslb_view_answer_bank(v2) == 0, "the next one into bank 0 again");
	CHECK(slot_of(v1, "sf.example.test.", "west") == 0, "sf moved to slot 0: %ld",
	      slot_of(v1, "sf.example.test.", "west"));
	ask(v1, "sf.example.test", DNS_TYPE_A);
	ask(v1, "sf.example.test", DNS_TYPE_A);
	CHECK(qs.answers.slot[0][slot_of(v0, "sf.example.test.", "west")] == 1,
	      "the old bank keeps the old view's count");
	CHECK(qs.answers.slot[1][0] == 2, "the new bank counts the new view's");

	const gslb_health_t *cur = gslb_view_health(v1);
	gslb_health_t *h = gslb_health_dup(cur, cur->count);
	gslb_view_t *derived = gslb_view_with_health(v1, h);
	CHECK(gslb_view_answer_bank(derived) == 1, "a derived view shares its build's bank");
	gslb_view_free(derived);
	gslb_view_free(v0);
	gslb_view_free(v1);
	gslb_view_free(v2);
}

/* Services whose slots lie beyond GSLB_ANSWER_SLOTS are counted as untracked, not elsewhere. */
static void test_untracked(void)
{
	enum { MANY = GSLB_ANSWER_SLOTS / 4 + 10 }; /* one datacenter each: 4 slots a service */
	static conf_service_t many[MANY];
	static char names[MANY][32];
	conf_t c;
	init_conf(&c);
	for (size_t i = 0; i < MANY; i++) {
		snprintf(names[i], sizeof(names[i]), "s%zu.example.test.", i);
		many[i] = service(names[i], d_fb, 1, NULL);
	}
	c.services = many;
	c.n_services = MANY;
	memset(&qs, 0, sizeof(qs));
	gslb_view_t *v = build(&c, NULL);
	CHECK(gslb_view_answer_slots(v) == (size_t)MANY * 4, "slots %zu",
	      gslb_view_answer_slots(v));
	ask(v, "s0.example.test", DNS_TYPE_A);
	ask(v, names[MANY - 1], DNS_TYPE_A);
	ask(v, names[MANY - 1], DNS_TYPE_A);
	CHECK(qs.answers.slot[0][0] == 1, "the first service is tracked");
	CHECK(qs.answers.untracked[0] == 2, "the last one is untracked: %llu",
	      (unsigned long long)qs.answers.untracked[0]);
	uint64_t total = 0;
	for (size_t i = 0; i < GSLB_ANSWER_SLOTS; i++)
		total += qs.answers.slot[0][i];
	CHECK(total == 1, "no other slot counted: %llu", (unsigned long long)total);
	gslb_view_free(v);
}

int main(void)
{
	test_slots_and_counts();
	test_banks();
	test_untracked();
	return unit_finish("gslb_answers");
}
