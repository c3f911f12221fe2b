/* The smallest complete receiver: accept one session, take one message. */
#include <stdio.h>
#include <tailmark/client.h>

int main(void) {
    tm_channel *ch;
    if (tm_attach(NULL, &ch) < 0 || tm_listen(ch, 7000, NULL) < 0) {
        fprintf(stderr, "listen: %s\n", ch ? tm_last_error(ch) : "out of memory");
        tm_detach(ch);
        return 1;
    }
    struct tm_session_info info;
    if (tm_accept(ch, -1, &info) < 0) { /* waits for a peer to connect */
        fprintf(stderr, "accept: %s\n", tm_last_error(ch));
        tm_detach(ch);
        return 1;
    }
    struct tm_message m;
    int rc;
    while ((rc = tm_recv(ch, info.session, 0, &m)) == 0) /* one flag says the whole message is there */
        tm_wait(ch, 1000);
    if (rc < 0) {
        fprintf(stderr, "recv: %s\n", tm_last_error(ch));
        tm_detach(ch);
        return 1;
    }
    printf("%zu bytes from session %u: %.*s\n", m.len, m.session, (int)m.len, (const char *)m.data);
    tm_release(ch, &m); /* the sender now learns "delivered" */
    tm_close(ch, info.session);
    tm_detach(ch);
    return 0;
}
