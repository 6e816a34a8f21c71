/* fuzz_envelope: the RPC envelopes as a server and a client unpack them, and the MAC
 * computation over whatever they carry. */
#include <stdint.h>

#include "nb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nb_err err;
    Npubench__RequestEnvelope *req = NULL;
    if (nb_wire_unpack(&npubench__request_envelope__descriptor, data, size, 0, &req, &err) ==
        NB_OK) {
        uint8_t mac[NB_WIRE_MAC_LEN];
        nb_wire_request_mac("secret", req, mac);
        nb_wire_keys keys;
        unsigned roles;
        const char *key;
        int64_t deadline;
        if (nb_wire_keys_init(&keys, "c", "w", "a", &err) == NB_OK) {
            nb_wire_request_verify_keys(req, &keys, &roles, &key, &err);
            nb_wire_keys_free(&keys);
        }
        nb_wire_request_clock(req, 1700000000000, 1, &deadline, &err);
        nb_wire_free(req);
    }
    Npubench__ResponseEnvelope *resp = NULL;
    if (nb_wire_unpack(&npubench__response_envelope__descriptor, data, size, 0, &resp, &err) ==
        NB_OK) {
        uint8_t mac[NB_WIRE_MAC_LEN];
        nb_wire_response_mac("secret", resp->request_id, (int)resp->status, resp->message,
                             resp->payload.data, resp->payload.len, mac);
        nb_wire_free(resp);
    }
    return 0;
}
