/* test_hmac: HMAC-SHA256 against the RFC 4231 vectors, streaming vs one-shot,
 * and the constant-time compare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "nb_hmac.h"

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void check(const void *key, size_t kn, const void *data, size_t dn, const char *want)
{
    uint8_t mac[32];
    char got[65];
    nb_hmac_sha256(key, kn, data, dn, mac);
    hex(mac, got);
    assert_string_equal(got, want);
}

static void test_rfc4231(void **state)
{
    (void)state;
    uint8_t k20[20], kaa[131], d50[50];
    memset(k20, 0x0b, sizeof k20);
    /* Test case 1 */
    check(k20, 20, "Hi There", 8,
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* Test case 2: key shorter than the block */
    check("Jefe", 4, "what do ya want for nothing?", 28,
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* Test case 3 */
    memset(kaa, 0xaa, sizeof kaa);
    memset(d50, 0xdd, sizeof d50);
    check(kaa, 20, d50, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    /* Test case 6: key longer than the block is hashed first */
    check(kaa, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* Test case 7 */
    const char *t7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    check(kaa, 131, t7, strlen(t7),
          "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_streaming(void **state)
{
    (void)state;
    const char *msg = "streamed in uneven pieces across the 64-byte block boundary, twice over";
    uint8_t one[32], many[32];
    nb_hmac_sha256("k", 1, msg, strlen(msg), one);
    nb_hmac_ctx h;
    nb_hmac_sha256_init(&h, "k", 1);
    for (size_t i = 0, step = 1; i < strlen(msg); i += step, step = step * 2 + 1) {
        size_t n = strlen(msg) - i < step ? strlen(msg) - i : step;
        nb_hmac_sha256_update(&h, msg + i, n);
    }
    nb_hmac_sha256_final(&h, many);
    assert_memory_equal(one, many, 32);
}

static void test_equal(void **state)
{
    (void)state;
    uint8_t a[32] = {0}, b[32] = {0};
    assert_true(nb_hmac_equal(a, b, 32));
    b[31] = 1;
    assert_false(nb_hmac_equal(a, b, 32));
    b[31] = 0;
    b[0] = 0x80;
    assert_false(nb_hmac_equal(a, b, 32));
    assert_true(nb_hmac_equal(a, b, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4231),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_equal),
    };
    return tu_run_group(tests, NULL, NULL);
}
