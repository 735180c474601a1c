// jemalloc's built-in options for laneq's executables (cmake/allocator.cmake, ADR 0006). Linked
// into every executable that links jemalloc; jemalloc reads this string at start, before the
// MALLOC_CONF environment variable, so an operator can still override any option there
// (for example MALLOC_CONF=thp:always).
//
// Transparent huge pages are left to the kernel's policy (Debian: only for memory that asks,
// "madvise"; jemalloc does not ask). thp:always was the setting until 2026-12-06: on a VM whose
// host backs a fresh 2 MiB huge page slowly, each huge-page fault of the memtable cost far more
// than the 512 small faults it saved, and durable groups_1000 ran at half the rate with twice
// the CPU per message (ADR 0006, "Addendum: huge pages withdrawn"). MALLOC_CONF=thp:always
// turns them on for one run.
//
// dirty_decay_ms and muzzy_decay_ms 30000: freed memory stays with jemalloc for 30 s before it
// is handed back (MADV_FREE, then purged) instead of 10 s dirty and no muzzy phase. A flushed
// memtable's memory is then reused by the next one instead of being returned and faulted in
// (and zeroed) again. Durable groups_1000 over a million messages: 10-12k page faults instead
// of 15-18k, and more messages per second in five of six alternating pairs (ADR 0006). Idle
// memory goes back to the system 30-60 s after a load drops instead of about 10 s.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "dirty_decay_ms:30000,muzzy_decay_ms:30000";
}
