// jemalloc's built-in options for laneq's executables (cmake/allocator.cmake, ADR 0006). Linked
// into every executable that links jemalloc; jemalloc reads this string at start, before the
// MALLOC_CONF environment variable, so an operator can still override any option there
// (for example MALLOC_CONF=thp:default).
//
// thp:always marks jemalloc's memory as eligible for transparent huge pages (the kernel's
// default here is THP only for memory that asks, "madvise"). The store's memtable (64 MiB,
// filled at about 400 bytes per message) otherwise takes one page fault per 4 KiB it touches:
// on this VM the faults were the largest part of the store thread's kernel time. Measured on
// laneqd (HTTP, unordered, 100,000 messages, alternating runs): 7-13% more messages per second
// and 10% less CPU per message, for about 35 MB more resident memory
// (docs/decisions/0010-performance-history.md).
//
// dirty_decay_ms and muzzy_decay_ms 30000: freed memory stays with jemalloc for 30 s before it
// is handed back (MADV_FREE, then purged) instead of 10 s dirty and no muzzy phase. A flushed
// memtable's memory is then reused by the next one instead of being returned and faulted in
// (and zeroed) again. Durable groups_1000 over a million messages: 10-12k page faults instead
// of 15-18k, and more messages per second in five of six alternating pairs (ADR 0006). Idle
// memory goes back to the system 30-60 s after a load drops instead of about 10 s.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "thp:always,dirty_decay_ms:30000,muzzy_decay_ms:30000";
}
