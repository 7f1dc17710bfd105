// Postgres regime: a target's own payload keys as a text[] (see own_keys.h).
#include "pg_includes.h"

#include "delivery/own_keys.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
}

Datum own_keys_array(const jobbuf::redis::TargetTraits& target)
{
    int count = static_cast<int>(target.own_key_count);
    Datum* elems = static_cast<Datum*>(palloc(sizeof(Datum) * (count + 1)));
    for (int i = 0; i < count; i++)
        elems[i] = CStringGetTextDatum(target.own_keys[i]);
    return PointerGetDatum(construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT));
}
