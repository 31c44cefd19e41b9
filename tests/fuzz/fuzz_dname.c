/*
 * Fuzz target: domain names. The first input byte is the offset of a name inside the rest
 * (a message, so compression pointers have something to point back to). An unpacked name must
 * survive text and back unchanged; the input read as text must too, once parsed.
 */
#include <string.h>

#include "dns/dname.h"
#include "fuzz.h"

/* Name -> text -> name gives the same octets; the walk to the root ends. */
static void check_name(const uint8_t *name, int len)
{
	char text[DNAME_STR_MAXLEN];
	uint8_t again[DNS_DNAME_MAXLEN];
	FUZZ_CHECK(len > 0 && dname_is_valid(name, (size_t)len) && dname_len(name) == (size_t)len);
	dname_to_str(name, text, sizeof(text));
	FUZZ_CHECK(dname_from_str(text, again) == len && memcmp(again, name, (size_t)len) == 0);
	unsigned labels = 0;
	for (const uint8_t *p = dname_parent(name); p != NULL; p = dname_parent(p)) {
		FUZZ_CHECK(dname_is_subdomain(name, p) && ++labels <= dname_labels(name));
	}
	FUZZ_CHECK(labels == dname_labels(name));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t name[DNS_DNAME_MAXLEN];
	char text[1024];
	if (size < 1)
		return 0;
	size_t off = data[0];
	if (off < size - 1) {
		int len = dname_unpack(data + 1, size - 1, &off, name);
		if (len >= 0)
			check_name(name, len);
	}
	size_t n = size - 1 < sizeof(text) - 1 ? size - 1 : sizeof(text) - 1;
	memcpy(text, data + 1, n);
	text[n] = '\0';
	int len = dname_from_str(text, name);
	if (len >= 0)
		check_name(name, len);
	return 0;
}
