// Postgres regime: jsonb_text_size (see jsonb_text_size.h). It follows JsonbToCString's compact
// form: '[' ']' '{' '}' around containers (none around a raw scalar), ", " between siblings,
// ": " after each key, strings escaped as escape_json escapes them.
#include "pg_includes.h"

#include "support/jsonb_text_size.h"

extern "C" {
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"
}

namespace {

size_t escaped_string_size(const char* text, int len)
{
    size_t size = 2;  // the quotes
    for (int i = 0; i < len; i++) {
        unsigned char c = static_cast<unsigned char>(text[i]);
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            size += 2;
        else if (c < ' ')
            size += 6;  // \u00XX
        else
            size += 1;
    }
    return size;
}

size_t scalar_size(const JsonbValue& v)
{
    switch (v.type) {
        case jbvNull:
            return 4;
        case jbvBool:
            return v.val.boolean ? 4 : 5;
        case jbvString:
            return escaped_string_size(v.val.string.val, v.val.string.len);
        case jbvNumeric: {
            char* text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
            size_t size = strlen(text);
            pfree(text);
            return size;
        }
        default:
            elog(ERROR, "jobbuf: unexpected jsonb scalar type %d", static_cast<int>(v.type));
            return 0;
    }
}

}  // namespace

size_t jsonb_text_size(Jsonb* payload, size_t stop_after)
{
    JsonbIterator* it = JsonbIteratorInit(&payload->root);
    JsonbValue v;
    JsonbIteratorToken previous = WJB_DONE;
    size_t size = 0;
    size_t children = 0;              // keys, elements and containers inside arrays
    size_t non_empty_containers = 0;  // each has (its children - 1) separators
    bool first = true;
    JsonbIteratorToken token;
    while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
        switch (token) {
            case WJB_BEGIN_ARRAY:
            case WJB_BEGIN_OBJECT:
                if (!(token == WJB_BEGIN_ARRAY && v.val.array.rawScalar))
                    size += 2;
                if (!first && previous != WJB_KEY)
                    children++;  // a container inside an array (an object's values follow their key)
                break;
            case WJB_END_ARRAY:
            case WJB_END_OBJECT:
                if (previous != WJB_BEGIN_ARRAY && previous != WJB_BEGIN_OBJECT)
                    non_empty_containers++;
                break;
            case WJB_KEY:
                children++;
                size += scalar_size(v) + 2;  // ": "
                break;
            case WJB_ELEM:
                children++;
                size += scalar_size(v);
                break;
            case WJB_VALUE:
                size += scalar_size(v);
                break;
            default:
                break;
        }
        first = false;
        previous = token;
        if (size > stop_after)
            return size;  // already too long (a lower bound): a 13 GB text needs no exact count
    }
    return size + 2 * (children - Min(children, non_empty_containers));
}
