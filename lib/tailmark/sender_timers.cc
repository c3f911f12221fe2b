// The Sender's retransmission timers: one lazy deadline per flow with
// unacknowledged messages, backed off on silence; when one fires, the flow's
// progress is looked at first, then its oldest messages' LAST packets are
// probed, and a flow that stays silent past the retry limit fails.
#include "tailmark/sender.h"
#include "tailmark/sender_flow.h"

namespace tailmark {

using namespace sender_detail;

void Sender::arm(SendFlow& f, uint64_t now, uint64_t ticks) {
    f.seen_acked = f.acked;
    f.seen_released = f.released;
    f.armed_tsc = now;
    f.deadline = now + (ticks ? ticks : 1);
    if (f.deadline < next_due_)
        next_due_ = f.deadline;
}

void Sender::restart(SendFlow& f, uint64_t now) {
    f.retries = 0;
    f.graced = false;
    f.rto = cfg_.rto;
    // A path with a queue: no timeout before three smoothed RTTs.
    if (f.cc != nullptr && 3 * f.cc->srtt() > f.rto)
        f.rto = 3 * f.cc->srtt() < cfg_.rto_max ? 3 * f.cc->srtt() : cfg_.rto_max;
    arm(f, now, f.rto);
}

// The timer of one flow, due. Progress (the cumulative ACK or the credits
// moved) re-arms it with the base timeout. Without progress, once the oldest
// unacknowledged message was sent a timeout ago, it expires: back-off, and a
// probe (the LAST packet again, flagged RETX) of the oldest few messages,
// which a receiver answers with a NACK of what it misses or an ACK. After
// retry_limit expiries in a row the flow fails. When everything is
// acknowledged and only the consumer's releases are awaited, a probe that
// the peer answers (any authentic control packet since) is a slow consumer,
// not a loss, and does not count.
void Sender::on_timer(SendFlow& f, uint64_t now) {
    const uint64_t due = f.deadline;
    f.deadline = 0;
    if (f.failed != FailReason::None || !f.spec.reliable)
        return;
    if (f.spec.local_released != nullptr)
        sync_local(f);
    if (f.acked == f.sent && f.released == f.sent)
        return; // nothing owed: the next message sent arms it again
    // Progress first: the grace below re-arms, which takes the cursors as
    // seen, so progress made before a late firing would be lost and the
    // next expiry counted on top of the old retries.
    if (f.acked != f.seen_acked || f.released != f.seen_released) {
        restart(f, now);
        return;
    }
    if (now - due > f.rto / 2 && !f.graced) {
        // Fired late: this lcore was held up (descheduled), and so was
        // whatever shares it, the rx role in loopback. Forgiven once since
        // the last progress: a second late firing counts, so a lcore whose
        // every round is slow still gives a dead peer up.
        f.graced = true;
        arm(f, now, f.rto / 4 + 1);
        return;
    }
    const uint32_t head_id = f.acked != f.sent ? f.acked : f.released;
    const OutMsg& head = f.out[head_id & f.mask];
    if (f.acked != f.sent && head.msg_id == head_id && now - head.sent_tsc < f.rto) {
        arm(f, now, f.rto - (now - head.sent_tsc)); // sent recently: not late yet
        return;
    }
    if (f.jobs != 0) {
        // Its own retransmissions (a NACK's, the last expiry's probes) are
        // still queued here, waiting for its session's pacer: the peer was
        // not asked yet, so its silence says nothing. Neither counted nor
        // a cut of the rate nor probes on top; looked at again in a timeout.
        // (A dead peer sends no NACKs: the queue drains and the timer
        // counts again.)
        arm(f, now, f.rto);
        return;
    }
    if (f.acked == f.sent && f.spec.local_released != nullptr) {
        // The receiver is in this process: it is alive, its consumer is slow.
        // Look at its cursor again later; nothing to probe or count.
        arm(f, now, cfg_.rto_max);
        return;
    }
    const bool answered = f.spec.link != nullptr &&
                          f.spec.link->peer_ctl_tsc.load(std::memory_order_relaxed) > f.armed_tsc;
    if (f.acked != f.sent || !answered) {
        bump(ctr_.rto_expired);
        // The path fell silent for a timeout: slow down. (A timeout while
        // ACKs still bring RTT samples is a lost packet's, which the
        // probe's NACK repairs; the delay speaks for the path.)
        if (f.cc != nullptr && f.acked != f.sent && f.cc->on_timeout(now, f.rto))
            bump(ctr_.cc_timeouts);
        if (++f.retries > cfg_.retry_limit) {
            fail_flow(f, FailReason::RetryLimit);
            return;
        }
    }
    // Probes: the oldest messages not yet acknowledged, or (all acknowledged)
    // the oldest not released, whose RETX LAST asks the receiver for an ACK.
    for (uint32_t m = head_id, k = 0; m != f.sent && k < kProbeMsgs; m++, k++) {
        const OutMsg& o = f.out[m & f.mask];
        if (o.msg_id != m)
            continue;
        Nack n{};
        n.flow = f.spec.id;
        n.msg_id = m;
        n.nranges = 1;
        n.ranges[0] = {static_cast<uint16_t>(o.pkt_count - 1), 1};
        if (!push_job(n))
            break;
        bump(ctr_.probes);
    }
    f.nacks.forget(); // the probes' answers are news
    f.rto = f.rto * 2 < cfg_.rto_max ? f.rto * 2 : cfg_.rto_max;
    arm(f, now, f.rto);
}

// Every due timer. The earliest deadline is kept, so a round with nothing due
// costs one compare.
void Sender::timers(uint64_t now) {
    if (now < next_due_)
        return;
    next_due_ = UINT64_MAX;
    for (size_t i = 0; i < flows_.size(); i++) { // on_timer may fail a flow, never remove one
        SendFlow& f = *flows_[i];
        if (f.deadline != 0 && now >= f.deadline)
            on_timer(f, now);
        if (f.deadline != 0 && f.deadline < next_due_)
            next_due_ = f.deadline;
    }
}

} // namespace tailmark
