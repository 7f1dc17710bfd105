// Postgres regime: the installed version of the extension's SQL (see extension_version.h).
#include "pg_includes.h"

#include "metadata/extension_version.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

InstalledJobbuf installed_jobbuf(void)
{
    InstalledJobbuf found{InstalledExtension::Missing, InvalidOid, ""};
    Relation catalog = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("jobbuf"));
    SysScanDesc scan = systable_beginscan(catalog, ExtensionNameIndexId, true, nullptr, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    if (HeapTupleIsValid(tuple)) {
        auto* row = reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple));
        bool isnull = false;
        Datum version = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(catalog), &isnull);
        found.extension_oid = row->oid;
        if (!isnull)
            text_to_cstring_buffer(DatumGetTextPP(version), found.version, sizeof(found.version));
        found.state =
            strcmp(found.version, kJobbufSqlVersion) == 0 ? InstalledExtension::Current : InstalledExtension::Outdated;
    }
    systable_endscan(scan);
    table_close(catalog, AccessShareLock);
    return found;
}

// jobbuf.library_version(): the SQL version the loaded library implements. Exported only by 1.1
// and later libraries, so the update script, which creates it, fails while an older library is
// loaded (ALTER EXTENSION jobbuf UPDATE before the restart that loads the new build).
extern "C" {
PG_FUNCTION_INFO_V1(jobbuf_library_version);
PGDLLEXPORT Datum jobbuf_library_version(PG_FUNCTION_ARGS)
{
    PG_RETURN_TEXT_P(cstring_to_text(kJobbufSqlVersion));
}
}
