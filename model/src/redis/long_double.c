/* INCRBYFLOAT and HINCRBYFLOAT arithmetic exactly as Redis 7.0.15 does it, in C `long double`
 * (x87 80-bit on x86_64), which Rust has no type for: `util.c` `string2ld` (strtold, whole
 * string, no leading space, no overflow, no underflow to zero, no NaN) and `ld2string` in
 * LD_STR_HUMAN mode (`%.17Lf`, trailing zeros and dot trimmed, "-0" as "0"). */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

static int string2ld(const char *s, size_t slen, long double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' ||
        (size_t)(eptr - buf) != slen ||
        (errno == ERANGE &&
            (value == HUGE_VAL || value == -HUGE_VAL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL ||
        isnan(value))
        return 0;

    if (dp) *dp = value;
    return 1;
}

static int ld2string_human(char *buf, size_t len, long double value) {
    size_t l = 0;

    if (isinf(value)) {
        if (len < 5) return 0;
        if (value > 0) {
            memcpy(buf, "inf", 3);
            l = 3;
        } else {
            memcpy(buf, "-inf", 4);
            l = 4;
        }
    } else {
        l = snprintf(buf, len, "%.17Lf", value);
        if (l + 1 > len) return 0;
        if (strchr(buf, '.') != NULL) {
            char *p = buf + l - 1;
            while (*p == '0') {
                p--;
                l--;
            }
            if (*p == '.') l--;
        }
        if (l == 2 && buf[0] == '-' && buf[1] == '0') {
            buf[0] = '0';
            l = 1;
        }
    }
    buf[l] = '\0';
    return (int)l;
}

/* 0 if `s` is not a valid long double for Redis; else 1 if finite, 2 if infinite. */
int locksim_ld_check(const char *s, size_t slen) {
    long double value;
    if (!string2ld(s, slen, &value)) return 0;
    return isinf(value) ? 2 : 1;
}

/* `value` (NULL: 0) + `incr`, both valid for locksim_ld_check, formatted into `out` (at least
 * MAX_LONG_DOUBLE_CHARS bytes). The length, or -1 if the sum is NaN or infinite. */
int locksim_ld_add_human(const char *value, size_t vlen, const char *incr, size_t ilen,
                         char *out, size_t outlen) {
    long double v = 0, i = 0;
    if (value != NULL && !string2ld(value, vlen, &v)) return -2;
    if (!string2ld(incr, ilen, &i)) return -2;
    v += i;
    if (isnan(v) || isinf(v)) return -1;
    return ld2string_human(out, outlen, v);
}
