/*
 * The self-check's query and the judgement of its replies: one table row per reply, built
 * with the response builder from the very query the check sends.
 */
#include "cluster/selfquery.h"

#include <string.h>

#include "dns/dname.h"
#include "dns/msg.h"
#include "dns/pkt.h"
#include "dns/wire.h"
#include "unit.h"

static void name_set(const char *text, uint8_t out[DNS_DNAME_MAXLEN])
{
	int len = dname_from_str(text, out);
	CHECK(len > 0, "name %s parsed", text);
}

typedef enum {
	R_GOOD,      /* as asked */
	R_NO_AA,     /* AA clear */
	R_REFUSED,   /* rcode REFUSED */
	R_OTHER_ID,  /* id + 1 */
	R_OTHER_QN,  /* another question name */
	R_NO_QR,     /* QR clear (our own query reflected) */
	R_EMPTY,     /* NOERROR, nothing in the answer */
	R_OTHER_OWN, /* the record under another owner */
	R_SHORT,     /* cut to 5 bytes */
	R_BAD_AN,    /* ancount 1 and nothing behind it */
} reply_kind_t;

typedef struct {
	const char *name;
	bool soa;          /* SOA of example.test, else id.server CH TXT */
	const char *txt;   /* expected id.server text */
	const char *reply; /* the id.server text the reply carries */
	reply_kind_t kind;
	int want;
	const char *why; /* substring of the reason, NULL = not checked */
} row_t;

static const row_t rows[] = {
    {"SOA with AA", true, NULL, NULL, R_GOOD, 1, NULL},
    {"SOA without AA", true, NULL, NULL, R_NO_AA, 0, "no AA flag"},
    {"SOA REFUSED", true, NULL, NULL, R_REFUSED, 0, "rcode REFUSED"},
    {"another id", true, NULL, NULL, R_OTHER_ID, -1, NULL},
    {"another question", true, NULL, NULL, R_OTHER_QN, -1, NULL},
    {"no QR", true, NULL, NULL, R_NO_QR, -1, NULL},
    {"empty answer", true, NULL, NULL, R_EMPTY, 0, "no SOA record"},
    {"SOA of another owner", true, NULL, NULL, R_OTHER_OWN, 0, "no SOA record"},
    {"short datagram", true, NULL, NULL, R_SHORT, -1, NULL},
    {"malformed answer", true, NULL, NULL, R_BAD_AN, 0, "malformed"},
    {"id.server of this node", false, "n1", "n1", R_GOOD, 1, NULL},
    {"id.server of another node", false, "n1", "n2", R_GOOD, 0, "answers \"n2\", not"},
    {"id.server, any node", false, NULL, "n7", R_GOOD, 1, NULL},
    {"id.server without AA is fine", false, "n1", "n1", R_NO_AA, 1, NULL},
    {"id.server REFUSED", false, "n1", "n1", R_REFUSED, 0, "rcode REFUSED"},
    {"id.server empty", false, "n1", NULL, R_EMPTY, 0, "no TXT record"},
};

static size_t make_reply(const row_t *r, const uint8_t *query, size_t qlen, uint8_t *buf,
                         size_t size)
{
	uint8_t copy[512];
	memcpy(copy, query, qlen);
	if (r->kind == R_OTHER_QN)
		copy[DNS_HEADER_LEN + 1] = 'x'; /* "xxample.test" */
	dns_query_t q;
	dns_query_parse(copy, qlen, &q);
	if (r->kind == R_OTHER_ID)
		q.id++;
	dns_msg_t msg;
	dns_msg_init(&msg, buf, size);
	dns_msg_begin(&msg, &q, r->kind == R_REFUSED ? DNS_RCODE_REFUSED : DNS_RCODE_NOERROR);
	if (r->kind != R_NO_AA)
		dns_msg_set_flags(&msg, DNS_FLAG_AA, 0);
	if (r->kind == R_NO_QR)
		dns_msg_set_flags(&msg, 0, DNS_FLAG_QR);
	uint8_t owner[DNS_DNAME_MAXLEN];
	name_set(r->kind == R_OTHER_OWN ? "www.example.test" : "example.test", owner);
	if (r->soa && r->kind != R_EMPTY && r->kind != R_REFUSED) {
		static const uint8_t soa[] = {2, 'n', 's', 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
		                              0, 0,   0,   3, 0, 0, 0, 4, 0, 0, 0, 5};
		dns_msg_put_rr(&msg, DNS_SEC_ANSWER, owner, DNS_TYPE_SOA, DNS_CLASS_IN, 60, soa,
		               sizeof(soa));
	}
	if (!r->soa && r->reply && r->kind != R_EMPTY) {
		uint8_t id[DNS_DNAME_MAXLEN], txt[64];
		name_set("ID.Server", id);
		size_t n = strlen(r->reply);
		txt[0] = (uint8_t)n;
		memcpy(txt + 1, r->reply, n);
		dns_msg_put_rr(&msg, DNS_SEC_ANSWER, id, DNS_TYPE_TXT, DNS_CLASS_CH, 0, txt,
		               (uint16_t)(n + 1));
	}
	size_t len = dns_msg_finish(&msg);
	return r->kind == R_SHORT ? 5 : len;
}

static void test_rows(void)
{
	for (size_t i = 0; i < STEER_ARRAY_LEN(rows); i++) {
		const row_t *r = &rows[i];
		cluster_question_t q = {.id = (uint16_t)(0x1234 + i), .txt = r->txt};
		if (r->soa) {
			name_set("example.test", q.qname);
			q.qtype = DNS_TYPE_SOA;
			q.qclass = DNS_CLASS_IN;
		} else {
			name_set("id.server", q.qname);
			q.qtype = DNS_TYPE_TXT;
			q.qclass = DNS_CLASS_CH;
		}
		uint8_t query[512], reply[512];
		size_t qlen = cluster_question_build(&q, query, sizeof(query));
		CHECK(qlen > DNS_HEADER_LEN, "%s: query built (%zu bytes)", r->name, qlen);
		if (qlen <= DNS_HEADER_LEN)
			continue;
		CHECK(!(wire_read_u16(query + 2) & DNS_FLAG_QR) && wire_read_u16(query) == q.id &&
		          wire_read_u16(query + 10) == 1,
		      "%s: a query with our id and an OPT record", r->name);
		size_t rlen = make_reply(r, query, qlen, reply, sizeof(reply));
		if (r->kind == R_BAD_AN) {
			/* the question alone, claiming one answer record */
			rlen = qlen - DNS_OPT_RR_LEN;
			memcpy(reply, query, rlen);
			wire_write_u16(reply + 2, DNS_FLAG_QR | DNS_FLAG_AA);
			wire_write_u16(reply + 6, 1);
			wire_write_u16(reply + 10, 0);
		}
		char why[128] = "";
		int got = cluster_question_judge(&q, reply, rlen, why, sizeof(why));
		CHECK(got == r->want, "%s: judged %d, want %d (%s)", r->name, got, r->want, why);
		CHECK(!r->why || strstr(why, r->why), "%s: reason '%s' lacks '%s'", r->name, why,
		      r->why);
	}
}

static void test_build_small_buffer(void)
{
	cluster_question_t q = {.id = 1, .qtype = DNS_TYPE_SOA, .qclass = DNS_CLASS_IN};
	name_set("example.test", q.qname);
	uint8_t buf[20];
	CHECK(cluster_question_build(&q, buf, sizeof(buf)) == 0, "a query that does not fit is 0");
}

int main(void)
{
	test_rows();
	test_build_small_buffer();
	return unit_finish("cluster_selfquery");
}
