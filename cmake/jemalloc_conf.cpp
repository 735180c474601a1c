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
// and 10% less CPU per message, for about 35 MB more resident memory (benchmarks/README.md).
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "thp:always";
}
