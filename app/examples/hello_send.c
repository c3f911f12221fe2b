/* The smallest complete sender: one session, one message, its completion. */
#include <stdio.h>
#include <string.h>
#include <tailmark/client.h>

int main(int argc, char **argv) {
    const char *peer = argc > 1 ? argv[1] : "198.18.0.2";
    tm_channel *ch;
    if (tm_attach(NULL, &ch) < 0) { /* $TAILMARK_SOCKET, else /run/tailmark/tailmarkd.sock */
        fprintf(stderr, "attach: %s\n", ch ? tm_last_error(ch) : "out of memory");
        tm_detach(ch);
        return 1;
    }
    tm_session s;
    if (tm_connect(ch, peer, 7000, NULL, &s) < 0) { /* 1 flow, ring 64, messages up to 1 MiB */
        fprintf(stderr, "connect: %s\n", tm_last_error(ch));
        tm_detach(ch);
        return 1;
    }
    const char text[] = "hello, tailmark";
    char *buf = tm_buf_alloc(ch, sizeof(text)); /* sent from here, zero-copy */
    memcpy(buf, text, sizeof(text));
    if (tm_send(ch, s, 0, buf, sizeof(text), 42) < 0) {
        fprintf(stderr, "send: %s\n", tm_last_error(ch));
        tm_detach(ch);
        return 1;
    }
    struct tm_completion c;
    int rc;
    while ((rc = tm_poll_completions(ch, &c, 1)) == 0)
        tm_wait(ch, 1000); /* spins briefly, then sleeps until the daemon signals */
    if (rc < 0) {
        fprintf(stderr, "completions: %s\n", tm_last_error(ch));
        tm_detach(ch);
        return 1;
    }
    printf("message %u (cookie %llu): %s\n", c.msg_id, (unsigned long long)c.cookie,
           c.status == TM_DELIVERED ? "delivered" : tm_fail_reason_name(c.reason));
    tm_buf_free(ch, buf);
    tm_close(ch, s);
    tm_detach(ch);
    return c.status == TM_DELIVERED ? 0 : 1;
}
