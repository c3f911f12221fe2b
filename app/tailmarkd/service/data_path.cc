// The service's data path, on the tx lcores: an application's submissions
// as the Sender's source, and its completions into its rings. Reached
// through the Sender's source and the tx lcore's completion sink.
// Fast path: no heap allocation, no lock, no log.
#include "internal.h"

namespace tailmark::app {

void svc_shinfo_free(void*, void* opaque) {
    SvcHold* h = static_cast<SvcHold*>(opaque);
    // Sized for every hold: never full.
    rte_ring_mp_enqueue_elem(h->owner->free_shinfo, &h->index, sizeof(uint32_t));
}

// The Sender's source for an application's flow: its next submission, as
// an extbuf over its arena. Taken only when the completion ring has room for
// the completion of everything held plus this one, so svc_complete() never
// finds it full. A submission outside the arena is completed at once as
// invalid (msg_id ~0): the app's mistake, never the daemon's crash.
bool svc_source(void* ctx, void* user, uint32_t msg_id, Message& m, uint64_t& cookie) {
    (void)msg_id;
    const engine::Switches& sw = *static_cast<const engine::Switches*>(ctx);
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(user);
    if (sw.phase_now() != Phase::Run)
        return false;
    for (;;) {
        if (f.sq_head_seen == f.sq_tail) {
            f.sq_head_seen = __atomic_load_n(&f.sq->head, __ATOMIC_ACQUIRE);
            if (f.sq_head_seen == f.sq_tail)
                return false;
        }
        if (f.sq_head_seen - f.sq_tail > f.sq_mask + 1) { // no producer writes that: the app's own flow waits
            bump(f.ctr.bad_head);
            f.sq_head_seen = f.sq_tail; // looked at again next time
            return false;
        }
        if (f.cq_head - f.cq_tail_seen + f.inflight >= f.cq_mask + 1) {
            f.cq_tail_seen = __atomic_load_n(&f.cq->tail, __ATOMIC_ACQUIRE);
            if (f.cq_head - f.cq_tail_seen + f.inflight >= f.cq_mask + 1) {
                bump(f.ctr.cq_waits);
                return false; // the app has not taken its completions: wait
            }
        }
        const tm_sqe e = f.sqe[f.sq_tail & f.sq_mask];
        if (e.len > f.max_msg || e.offset > f.arena_len || e.len > f.arena_len - e.offset) {
            tm_cqe& q = f.cqe[f.cq_head & f.cq_mask];
            q.cookie = e.cookie;
            q.msg_id = UINT32_MAX;
            q.status = TM_FAILED;
            q.reason = TM_FAIL_INVALID;
            q.reserved = 0;
            f.cq_head++;
            __atomic_store_n(&f.cq->head, f.cq_head, __ATOMIC_RELEASE);
            f.sq_tail++;
            __atomic_store_n(&f.sq->tail, f.sq_tail, __ATOMIC_RELEASE);
            bump(f.ctr.invalid);
            continue;
        }
        // A message the Sender copies into its packets needs no shared
        // info: only its record reads the arena, and the arena outlives the
        // flow (reap). The others' packets may outlive their completion.
        rte_mbuf_ext_shared_info* sh = nullptr;
        if (!f.zero_copy) {
            bump(f.ctr.copied);
        } else if (e.len > Sender::kCopyBreak) {
            uint32_t k;
            if (rte_ring_sc_dequeue_elem(f.free_shinfo, &k, sizeof(k)) != 0) {
                bump(f.ctr.shinfo_waits);
                return false; // the port still holds earlier messages' packets
            }
            sh = &reinterpret_cast<SvcHold*>(f.shinfo)[k].sh;
            rte_mbuf_ext_refcnt_set(sh, 0); // the Sender's hold is the first reference
        }
        m.bytes = {f.arena + e.offset, static_cast<size_t>(e.len)};
        m.shinfo = sh;
        m.iova = f.arena_iova + e.offset;
        cookie = e.cookie;
        f.sq_tail++;
        __atomic_store_n(&f.sq->tail, f.sq_tail, __ATOMIC_RELEASE);
        f.inflight++;
        bump(f.ctr.taken);
        return true;
    }
}

namespace {

inline void svc_complete(const SendCompletion& c) {
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(c.user);
    tm_cqe& q = f.cqe[f.cq_head & f.cq_mask];
    q.cookie = c.cookie;
    q.msg_id = c.msg_id;
    q.status = c.status == SendStatus::Delivered ? TM_DELIVERED : TM_FAILED;
    q.reason = c.status == SendStatus::Delivered ? uint8_t{TM_FAIL_NONE} : fail_code(c.reason);
    q.reserved = 0;
    f.cq_head++;
    f.inflight--;
    bump(c.status == SendStatus::Delivered ? f.ctr.delivered : f.ctr.failed);
}

inline void svc_publish(const SendCompletion& c) {
    SvcSendFlow& f = *static_cast<SvcSendFlow*>(c.user);
    __atomic_store_n(&f.cq->head, f.cq_head, __ATOMIC_RELEASE);
}

} // namespace

void svc_complete_burst(void*, const SendCompletion* done, uint32_t k) {
    for (uint32_t i = 0; i < k; i++) {
        svc_complete(done[i]);
        if (i + 1 == k || done[i + 1].user != done[i].user) // the flow's last of the burst
            svc_publish(done[i]);
    }
}

} // namespace tailmark::app
