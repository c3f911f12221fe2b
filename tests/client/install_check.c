/* Built by install_test.sh against an installed libtailmark-client, with
 * pkg-config's flags only, as C99: the header is C, and attaching to a
 * socket that does not exist fails with a message naming it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <tailmark/client.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/nonexistent/tailmarkd.sock";
    struct tm_attach_opts o;
    memset(&o, 0, sizeof(o));
    o.socket_path = path;
    o.arena_bytes = 1 << 20;
    tm_channel *ch = NULL;
    int rc = tm_attach(&o, &ch);
    if (rc != -ENOENT) {
        fprintf(stderr, "install_check: tm_attach returned %d, not -ENOENT (%d)\n", rc, -ENOENT);
        return 1;
    }
    if (ch == NULL || strstr(tm_last_error(ch), path) == NULL) {
        fprintf(stderr, "install_check: the message does not name %s: '%s'\n", path, tm_last_error(ch));
        return 1;
    }
    printf("install_check: %d, %s\n", rc, tm_last_error(ch));
    tm_detach(ch);
    return 0;
}
