/* The kernels' secret-touching entries under Valgrind's memcheck, through their C ABI (agefast/kernels/_abi.py).

   harness LIBRARY SCRATCH_SIZE FILE_BUFFER_SIZE FILE_BATCH MUTEX_SIZE

   The method of ctgrind and TIMECOP: memcheck tracks, bit by bit, which
   values derive from memory marked undefined, and reports every conditional
   jump and every memory address computed from one. Marking the secrets
   undefined (the key, the plaintext a seal reads, the sealed chunks an open
   reads, their expected tags among them) turns those reports into reports of
   secret-dependent branches and addresses. The kernels declassify exactly one
   value themselves: each chunk's verdict, whether its tag matched
   (_common._verdict in _aead._tag_matches, a memcheck client request that is a
   no-op outside Valgrind), because what follows a failure (zeroing the chunk,
   stopping the batch) is public by design. What the harness reads back (the
   sealed output, the opened plaintext) is public output, marked defined
   before it is compared; the file kernel's writes are marked defined just
   before they reach the system call, which memcheck checks too.

   The sizes come from the command line (the test passes _abi's), so the
   layout lives in _abi only; the call's struct is _abi.BATCH_CALL. Prints one
   line per entry checked; exits non-zero if a result is wrong. memcheck's
   own report (--error-exitcode) says whether anything leaked. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <valgrind/memcheck.h>

#define CHUNK 65536
#define TAG 16
#define SEAL 0
#define OPEN 1

/* _abi.BATCH_CALL, "<32sQQqQqqq", at offset 0 of the scratch. */
struct batch_call {
    uint8_t key[32];
    uint64_t counter, src;
    int64_t n;
    uint64_t dst;
    int64_t m, final, mode;
};

typedef int64_t (*batch_fn)(void *);
typedef int64_t (*file_fn)(void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           void *, void *, void *, void *, void *);

static size_t scratch_size, file_buffer_size, file_batch, mutex_size;
static int failures;

/* The file kernel reads and writes through the C library's pread and
   pwrite, which it leaves to the process: these take their place
   (linked with -rdynamic). What it reads is secret (plaintext, or sealed
   chunks with their tags); what it writes is its public output. */
ssize_t pread(int fd, void *buf, size_t count, off_t at) {
    ssize_t n = syscall(SYS_pread64, fd, buf, count, at);
    if (n > 0)
        VALGRIND_MAKE_MEM_UNDEFINED(buf, n);
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t at) {
    VALGRIND_MAKE_MEM_DEFINED(buf, count);
    return syscall(SYS_pwrite64, fd, buf, count, at);
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void *zeroed(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n) != 0) {
        perror("posix_memalign");
        exit(2);
    }
    return memset(p, 0, n);
}

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok" : "WRONG", what);
    failures += !ok;
}

/* One batch call, with the key and all of src undefined; the output (public) defined again after it. */
static int64_t batch(batch_fn fn, const uint8_t *key, uint64_t counter, uint8_t *src, int64_t n, uint8_t *dst,
                     int64_t m, int final, int mode) {
    uint8_t *scratch = zeroed(scratch_size);
    struct batch_call *call = (struct batch_call *)scratch;
    memcpy(call->key, key, 32);
    call->counter = counter;
    call->src = (uint64_t)(uintptr_t)src;
    call->n = n;
    call->dst = (uint64_t)(uintptr_t)dst;
    call->m = m;
    call->final = final;
    call->mode = mode;
    VALGRIND_MAKE_MEM_UNDEFINED(call->key, 32);
    VALGRIND_MAKE_MEM_UNDEFINED(src, n);
    int64_t result = fn(scratch);
    VALGRIND_MAKE_MEM_DEFINED(dst, m);
    VALGRIND_MAKE_MEM_DEFINED(src, n);
    free(scratch);
    return result;
}

/* Seal n bytes as a final batch, open them, then open them with the last tag's first byte flipped. */
static void batches(batch_fn fn, const uint8_t *key, int64_t n, const char *what) {
    int64_t chunks = n ? (n + CHUNK - 1) / CHUNK : 1;
    int64_t sealed = n + chunks * TAG;
    uint8_t *plain = zeroed(n + 1), *box = zeroed(sealed), *back = zeroed(n + 1);
    char line[96];
    fill(plain, n, (uint64_t)n);
    snprintf(line, sizeof line, "seal %s", what);
    check(batch(fn, key, 5, plain, n, box, sealed, 1, SEAL) == sealed, line);
    snprintf(line, sizeof line, "open %s", what);
    check(batch(fn, key, 5, box, sealed, back, n, 1, OPEN) == chunks && memcmp(back, plain, n) == 0, line);
    box[sealed - TAG] ^= 1;
    memset(back, 0xAA, n);
    snprintf(line, sizeof line, "open %s, last tag wrong", what);
    int64_t verified = batch(fn, key, 5, box, sealed, back, n, 1, OPEN);
    /* a stitched build zeroes the failed chunk, a two-pass one leaves it alone */
    int64_t failed = (chunks - 1) * CHUNK;
    int same = 1;
    for (int64_t i = failed; i < n; i++)
        same &= back[i] == back[failed];
    check(verified == chunks - 1 && memcmp(back, plain, failed) == 0 && same
          && (back[failed] == 0 || back[failed] == 0xAA), line);
    free(plain); free(box); free(back);
}

static int memory_file(const char *name, const void *data, size_t n) {
    int fd = memfd_create(name, 0);
    if (fd < 0 || (n && syscall(SYS_pwrite64, fd, data, n, 0) != (ssize_t)n)) {
        perror("memfd");
        exit(2);
    }
    return fd;
}

static int64_t file_call(file_fn fn, const uint8_t *key, int mode, int src, int64_t src_at, int dst,
                         int64_t batches) {
    uint8_t *k = zeroed(32), *in = zeroed(file_buffer_size), *out = zeroed(file_buffer_size);
    uint8_t *scratch = zeroed(scratch_size), *lock = zeroed(mutex_size);
    int64_t *stop = zeroed(sizeof *stop);
    pthread_mutex_init((pthread_mutex_t *)lock, NULL);
    memcpy(k, key, 32);
    VALGRIND_MAKE_MEM_UNDEFINED(k, 32);
    int64_t result = fn(k, mode, src, src_at, dst, 3, 0, 1, batches, in, out, scratch, stop, lock);
    free(k); free(in); free(out); free(scratch); free(lock); free(stop);
    return result;
}

/* The file kernel seals two batches (the input at an offset, the output
   at another), opens them back, then opens them with a tag of the second batch wrong. */
static void files(file_fn fn, const uint8_t *key) {
    size_t plain_size = 2 * file_batch * CHUNK, sealed_size = 2 * file_batch * (CHUNK + TAG);
    uint8_t *plain = zeroed(plain_size + 7), *box = zeroed(sealed_size), *back = zeroed(plain_size);
    fill(plain + 7, plain_size, 99);
    int src = memory_file("plain", plain, plain_size + 7), sealed = memory_file("sealed", NULL, 0);
    check(file_call(fn, key, SEAL, src, 7, sealed, 2) == 0, "seal file, two batches");
    if (syscall(SYS_pread64, sealed, box, sealed_size, 3) != (ssize_t)sealed_size) {
        perror("pread");
        exit(2);
    }
    int opened = memory_file("opened", NULL, 0);
    check(file_call(fn, key, OPEN, sealed, 3, opened, 2) == 0
          && syscall(SYS_pread64, opened, back, plain_size, 3) == (ssize_t)plain_size
          && memcmp(back, plain + 7, plain_size) == 0, "open file, two batches");
    box[sealed_size - 1] ^= 1;
    int tampered = memory_file("tampered", box, sealed_size);
    /* _abi: ENDED_AT + b * ENDINGS + NOT_VERIFIED for batch b = 1 */
    check(file_call(fn, key, OPEN, tampered, 0, opened, 2) == 1 + 1 * 6 + 5, "open file, a tag wrong");
    close(src); close(sealed); close(opened); close(tampered);
    free(plain); free(box); free(back);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s LIBRARY SCRATCH_SIZE FILE_BUFFER_SIZE FILE_BATCH MUTEX_SIZE\n", argv[0]);
        return 2;
    }
    scratch_size = strtoul(argv[2], NULL, 10);
    file_buffer_size = strtoul(argv[3], NULL, 10);
    file_batch = strtoul(argv[4], NULL, 10);
    mutex_size = strtoul(argv[5], NULL, 10);
    void *library = dlopen(argv[1], RTLD_NOW);
    if (library == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    batch_fn batch_kernel = (batch_fn)dlsym(library, "agefast_batch");
    file_fn file_kernel = (file_fn)dlsym(library, "agefast_file_batches");
    if (batch_kernel == NULL || file_kernel == NULL) {
        fprintf(stderr, "no kernel symbols in %s\n", argv[1]);
        return 2;
    }
    uint8_t key[32];
    fill(key, sizeof key, 1);
    batches(batch_kernel, key, 5000, "one chunk");
    batches(batch_kernel, key, CHUNK + 1500, "a batch");
    files(file_kernel, key);
    return failures ? 1 : 0;
}
