// The one-line message behind the last failure of a channel: the library
// never prints, so this is how it says why.
#pragma once

namespace tailmark::client {

class LastError {
public:
    // Formats the message and returns -err (err a positive errno), so that
    // a failure reads `return err.set(EINVAL, "...")`.
    int set(int err, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
    // A literal, no formatting: for failures on the data path (-EAGAIN).
    int set_static(int err, const char* msg) {
        msg_ = msg;
        return -err;
    }
    const char* get() const { return msg_; }

private:
    char buf_[256] = {};
    const char* msg_ = "";
};

} // namespace tailmark::client
