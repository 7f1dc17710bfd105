// Postgres regime: parsing of jobbuf.database (see database_list.h). Names are split on commas
// with SplitGUCList: surrounding spaces are dropped, case is kept (database names are case
// sensitive), and double quotes allow a comma in a name.
#include "pg_includes.h"

#include "launcher/database_list.h"

extern "C" {
#include "nodes/pg_list.h"
#include "utils/varlena.h"
}

char* jobbuf_database = nullptr;

namespace {

bool is_every(const char* value)
{
    return value != nullptr && strcmp(value, "*") == 0;
}

// The names in value, or false when it does not parse. The names point into *copy; free both with
// free_names (check hooks run in the postmaster too: no leak per reload).
bool split_names(const char* value, char** copy, List** names)
{
    *copy = pstrdup(value);
    *names = NIL;
    return SplitGUCList(*copy, ',', names);
}

void free_names(char* copy, List* names)
{
    list_free(names);
    pfree(copy);
}

}  // namespace

bool database_list_valid(const char* value, char* detail, size_t detail_len)
{
    if (value == nullptr || value[0] == '\0') {
        snprintf(detail, detail_len, "jobbuf.database must name a database, a comma-separated list of them, or '*'.");
        return false;
    }
    if (is_every(value))
        return true;
    char* copy;
    List* names;
    bool valid = split_names(value, &copy, &names) && names != NIL;
    if (!valid)
        snprintf(detail, detail_len, "jobbuf.database must name a database, a comma-separated list of them, or '*'.");
    ListCell* cell;
    foreach (cell, names) {
        const char* name = static_cast<const char*>(lfirst(cell));
        if (valid && strlen(name) >= NAMEDATALEN) {
            snprintf(detail, detail_len, "a database name is at most %d bytes.", NAMEDATALEN - 1);
            valid = false;
        }
    }
    free_names(copy, names);
    return valid;
}

bool database_list_is_every(void)
{
    return is_every(jobbuf_database);
}

// Calls fn(name) for each listed name until it returns true; returns whether one did.
template <typename Fn>
bool any_listed(Fn fn)
{
    if (jobbuf_database == nullptr || is_every(jobbuf_database))
        return false;
    char* copy;
    List* names;
    bool found = false;
    if (split_names(jobbuf_database, &copy, &names)) {
        ListCell* cell;
        foreach (cell, names)
            found = found || fn(static_cast<const char*>(lfirst(cell)));
    }
    free_names(copy, names);
    return found;
}

bool database_list_names(const char* datname)
{
    return any_listed([datname](const char* name) { return strcmp(name, datname) == 0; });
}

void database_list_each(void (*fn)(const char* datname))
{
    any_listed([fn](const char* name) {
        fn(name);
        return false;
    });
}
