// A minimal JSON reader: walks a document along a path of object keys without building a tree.
#include "json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Nesting deeper than this is treated as malformed (bounds the recursion in skip_value).
#define MAX_NESTING 64

typedef struct {
    const char *at;
    const char *end;
} cursor_t;

static void skip_ws(cursor_t *c) {
    while (c->at < c->end && (*c->at == ' ' || *c->at == '\t' || *c->at == '\n' || *c->at == '\r')) {
        c->at++;
    }
}

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_hex4(cursor_t *c, uint32_t *out) {
    if (c->end - c->at < 4) return 0;
    uint32_t value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(c->at[i]);
        if (digit < 0) return 0;
        value = (value << 4) | (uint32_t)digit;
    }
    c->at += 4;
    *out = value;
    return 1;
}

static size_t put_utf8(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Reads the string at the cursor (which must be on its opening quote). When `out` is not NULL it
// receives the unescaped bytes (never longer than the escaped form) and `*out_len` their count.
// Returns 0 on malformed input.
static int read_string(cursor_t *c, char *out, size_t *out_len) {
    if (c->at >= c->end || *c->at != '"') return 0;
    c->at++;
    size_t n = 0;
    while (c->at < c->end) {
        char ch = *c->at++;
        if (ch == '"') {
            if (out_len) *out_len = n;
            return 1;
        }
        if (ch != '\\') {
            if (out) out[n] = ch;
            n++;
            continue;
        }
        if (c->at >= c->end) return 0;
        char esc = *c->at++;
        char plain;
        switch (esc) {
            case '"': plain = '"'; break;
            case '\\': plain = '\\'; break;
            case '/': plain = '/'; break;
            case 'b': plain = '\b'; break;
            case 'f': plain = '\f'; break;
            case 'n': plain = '\n'; break;
            case 'r': plain = '\r'; break;
            case 't': plain = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (!read_hex4(c, &cp)) return 0;
                if (cp >= 0xD800 && cp <= 0xDBFF && c->end - c->at >= 6 && c->at[0] == '\\' &&
                    c->at[1] == 'u') {
                    cursor_t low_at = {c->at + 2, c->end};
                    uint32_t low;
                    if (read_hex4(&low_at, &low) && low >= 0xDC00 && low <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        c->at = low_at.at;
                    }
                }
                // A \uXXXX escape is 6 bytes (12 for a pair) and encodes to at most 4.
                char buf[4];
                size_t len = put_utf8(buf, cp);
                if (out) memcpy(out + n, buf, len);
                n += len;
                continue;
            }
            default: return 0;
        }
        if (out) out[n] = plain;
        n++;
    }
    return 0;
}

static int skip_value(cursor_t *c, int nesting) {
    if (nesting > MAX_NESTING) return 0;
    skip_ws(c);
    if (c->at >= c->end) return 0;
    char open = *c->at;
    if (open == '"') return read_string(c, NULL, NULL);
    if (open == '{' || open == '[') {
        char close = open == '{' ? '}' : ']';
        c->at++;
        skip_ws(c);
        if (c->at < c->end && *c->at == close) {
            c->at++;
            return 1;
        }
        for (;;) {
            if (open == '{') {
                skip_ws(c);
                if (!read_string(c, NULL, NULL)) return 0;
                skip_ws(c);
                if (c->at >= c->end || *c->at != ':') return 0;
                c->at++;
            }
            if (!skip_value(c, nesting + 1)) return 0;
            skip_ws(c);
            if (c->at >= c->end) return 0;
            if (*c->at == ',') {
                c->at++;
                continue;
            }
            if (*c->at == close) {
                c->at++;
                return 1;
            }
            return 0;
        }
    }
    // A number, true, false or null: everything up to the next delimiter.
    const char *start = c->at;
    while (c->at < c->end && strchr(",}] \t\r\n", *c->at) == NULL) c->at++;
    return c->at > start;
}

// With the cursor on an object, moves it onto the value of `key`. Returns 0 when absent.
static int find_member(cursor_t *c, const char *key) {
    skip_ws(c);
    if (c->at >= c->end || *c->at != '{') return 0;
    c->at++;
    size_t key_len = strlen(key);
    for (;;) {
        skip_ws(c);
        if (c->at < c->end && *c->at == '}') return 0;
        cursor_t probe = *c;
        size_t name_len;
        if (!read_string(&probe, NULL, &name_len)) return 0;
        int matches = 0;
        if (name_len == key_len) {
            char *name = malloc(name_len + 1);
            if (name == NULL) return 0;
            read_string(c, name, NULL);
            matches = memcmp(name, key, key_len) == 0;
            free(name);
        } else {
            *c = probe;
        }
        skip_ws(c);
        if (c->at >= c->end || *c->at != ':') return 0;
        c->at++;
        skip_ws(c);
        if (matches) return 1;
        if (!skip_value(c, 1)) return 0;
        skip_ws(c);
        if (c->at < c->end && *c->at == ',') {
            c->at++;
            continue;
        }
        return 0;
    }
}

// Moves the cursor onto the value at `path`. Returns 0 when absent or malformed on the way.
static int find_path(cursor_t *c, const char *const *path, size_t depth) {
    for (size_t i = 0; i < depth; i++) {
        if (!find_member(c, path[i])) return 0;
    }
    skip_ws(c);
    return 1;
}

const char *json_get_raw(const char *json, size_t len, const char *const *path, size_t depth,
                         size_t *raw_len) {
    cursor_t c = {json, json + len};
    if (!find_path(&c, path, depth)) return NULL;
    const char *start = c.at;
    if (!skip_value(&c, 1)) return NULL;
    *raw_len = (size_t)(c.at - start);
    return start;
}

char *json_get_string(const char *json, size_t len, const char *const *path, size_t depth) {
    cursor_t c = {json, json + len};
    if (!find_path(&c, path, depth)) return NULL;
    cursor_t probe = c;
    size_t value_len;
    if (!read_string(&probe, NULL, &value_len)) return NULL;
    char *value = malloc(value_len + 1);
    if (value == NULL) return NULL;
    read_string(&c, value, NULL);
    value[value_len] = '\0';
    return value;
}

int json_each_key(const char *json, size_t len, const char *const *path, size_t depth,
                  int (*each)(const char *key, void *ctx), void *ctx) {
    cursor_t c = {json, json + len};
    if (!find_path(&c, path, depth)) return 0;
    if (c.at >= c.end || *c.at != '{') return 0;
    // The whole object must be well formed before any key is handed out.
    cursor_t whole = c;
    if (!skip_value(&whole, 1)) return 0;
    c.at++;
    skip_ws(&c);
    if (c.at < c.end && *c.at == '}') return 1;
    for (;;) {
        skip_ws(&c);
        cursor_t probe = c;
        size_t key_len;
        if (!read_string(&probe, NULL, &key_len)) return 0;
        char *key = malloc(key_len + 1);
        if (key == NULL) return 0;
        read_string(&c, key, NULL);
        key[key_len] = '\0';
        int more = each(key, ctx);
        free(key);
        if (!more) return 1;
        skip_ws(&c);
        c.at++;  // the ':' (checked by skip_value above)
        if (!skip_value(&c, 1)) return 0;
        skip_ws(&c);
        if (*c.at == '}') return 1;
        c.at++;  // the ','
    }
}

// The length of `text` as a JSON string, quotes included; writes it to `out` when not NULL.
static size_t quote(const char *text, char *out) {
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (out) out[n] = '"';
    n++;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char plain = 0;
        switch (*p) {
            case '"': plain = '"'; break;
            case '\\': plain = '\\'; break;
            case '\n': plain = 'n'; break;
            case '\r': plain = 'r'; break;
            case '\t': plain = 't'; break;
            default: break;
        }
        if (plain) {
            if (out) {
                out[n] = '\\';
                out[n + 1] = plain;
            }
            n += 2;
        } else if (*p < 0x20) {
            if (out) {
                memcpy(out + n, "\\u00", 4);
                out[n + 4] = hex[*p >> 4];
                out[n + 5] = hex[*p & 0xF];
            }
            n += 6;
        } else {
            if (out) out[n] = (char)*p;
            n++;
        }
    }
    if (out) out[n] = '"';
    return n + 1;
}

// Whether the JSON text `from..to` is the string `value` (however it is escaped).
static int is_string(const char *from, const char *to, const char *value) {
    cursor_t c = {from, to};
    size_t n, want = strlen(value);
    if (!read_string(&c, NULL, &n) || n != want) return 0;
    char *text = malloc(n + 1);
    if (text == NULL) return 0;
    c.at = from;
    read_string(&c, text, NULL);
    int same = memcmp(text, value, n) == 0;
    free(text);
    return same;
}

char *json_set_string(const char *json, size_t len, const char *const *path, size_t depth,
                      const char *value, size_t *out_len, int *changed) {
    if (depth == 0) return NULL;
    cursor_t whole = {json, json + len};
    skip_ws(&whole);
    if (whole.at >= whole.end || *whole.at != '{' || !skip_value(&whole, 1)) return NULL;
    skip_ws(&whole);
    if (whole.at != whole.end) return NULL;

    // Walk down while the members exist: `object` is the innermost object reached.
    cursor_t c = {json, json + len};
    skip_ws(&c);
    const char *object = c.at;
    size_t found = 0;
    while (found < depth) {
        cursor_t member = {object, json + len};
        if (!find_member(&member, path[found])) break;
        found++;
        if (found == depth) {
            c = member;
            break;
        }
        if (member.at >= member.end || *member.at != '{') return NULL;
        object = member.at;
    }

    size_t quoted = quote(value, NULL);
    const char *cut_from, *cut_to;  // the span of `json` replaced
    size_t insert_len;
    int in_empty = 0;
    if (found == depth) {
        // The member exists: its value is replaced.
        cut_from = c.at;
        if (!skip_value(&c, 1)) return NULL;
        cut_to = c.at;
        insert_len = quoted;
    } else {
        // Inserted first in `object`: `"k1":{"k2":...{"kn":"value"}...}` and a `,` unless empty.
        cursor_t inside = {object + 1, json + len};
        skip_ws(&inside);
        in_empty = *inside.at == '}';
        cut_from = cut_to = object + 1;
        insert_len = quoted + (in_empty ? 0 : 1);
        for (size_t i = found; i < depth; i++) {
            insert_len += quote(path[i], NULL) + 1;  // "key":
            if (i + 1 < depth) insert_len += 2;       // { }
        }
    }
    size_t head = (size_t)(cut_from - json), tail = len - (size_t)(cut_to - json);
    size_t total = head + insert_len + tail;
    char *out = malloc(total + 1);
    if (out == NULL) return NULL;
    memcpy(out, json, head);
    char *at = out + head;
    if (found == depth) {
        at += quote(value, at);
    } else {
        for (size_t i = found; i < depth; i++) {
            at += quote(path[i], at);
            *at++ = ':';
            if (i + 1 < depth) *at++ = '{';
        }
        at += quote(value, at);
        for (size_t i = found; i + 1 < depth; i++) *at++ = '}';
        if (!in_empty) *at++ = ',';
    }
    memcpy(at, cut_to, tail);
    out[total] = '\0';
    if (out_len) *out_len = total;
    if (changed) *changed = found != depth || !is_string(cut_from, cut_to, value);
    return out;
}
