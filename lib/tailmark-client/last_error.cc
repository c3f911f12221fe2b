#include "last_error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tailmark::client {

int LastError::set(int err, const char* fmt, ...) {
    // Into a scratch buffer first: an argument may be our own previous message.
    char tmp[sizeof(buf_)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    for (char* c = tmp; *c != '\0'; ++c) // one line, whatever a peer's text held
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    memcpy(buf_, tmp, sizeof(buf_));
    msg_ = buf_;
    return -err;
}

} // namespace tailmark::client
