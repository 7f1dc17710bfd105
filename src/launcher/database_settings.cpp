// Postgres regime: the drain worker's per-database settings (see database_settings.h).
#include "pg_includes.h"

#include "config/refused_settings.h"
#include "config/shared_state.h"
#include "launcher/database_settings.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "storage/ipc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace {

char* remembered = nullptr;  // in TopMemoryContext

bool is_jobbuf_setting(const char* name_or_entry)
{
    return strncmp(name_or_entry, "jobbuf.", 7) == 0;
}

// The jobbuf.* entries ("name=value", one a line) that ALTER DATABASE ... SET stored for this
// database, read in a transaction of its own, in TopMemoryContext.
char* read_database_settings(void)
{
    StartTransactionCommand();
    StringInfoData entries;
    MemoryContext previous = MemoryContextSwitchTo(TopMemoryContext);
    initStringInfo(&entries);
    MemoryContextSwitchTo(previous);
    Relation catalog = table_open(DbRoleSettingRelationId, AccessShareLock);
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(MyDatabaseId));
    ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(InvalidOid));
    SysScanDesc scan = systable_beginscan(catalog, DbRoleSettingDatidRolidIndexId, true, nullptr, 2, keys);
    HeapTuple tuple = systable_getnext(scan);
    bool isnull = true;
    Datum config = HeapTupleIsValid(tuple)
                       ? heap_getattr(tuple, Anum_pg_db_role_setting_setconfig, RelationGetDescr(catalog), &isnull)
                       : (Datum)0;
    if (!isnull) {
        Datum* items;
        bool* nulls;
        int count;
        deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
        for (int i = 0; i < count; i++) {
            char* entry = nulls[i] ? nullptr : TextDatumGetCString(items[i]);
            if (entry != nullptr && is_jobbuf_setting(entry))
                appendStringInfo(&entries, "%s\n", entry);
        }
    }
    systable_endscan(scan);
    table_close(catalog, AccessShareLock);
    CommitTransactionCommand();
    return entries.data;
}

}  // namespace

bool kept_database_setting(const config_generic* var)
{
    return var->source == PGC_S_DATABASE && var->context == PGC_SUSET && strncmp(var->name, "jobbuf.redis_", 13) == 0;
}

void remember_database_settings(void)
{
    remembered = read_database_settings();
}

char* database_setting_value(const char* name)
{
    char* found = nullptr;
    size_t name_len = strlen(name);
    for (const char* line = remembered ? remembered : ""; *line != '\0';) {
        const char* end = strchr(line, '\n');
        size_t line_len = end ? static_cast<size_t>(end - line) : strlen(line);
        if (line_len > name_len && line[name_len] == '=' && pg_strncasecmp(line, name, name_len) == 0) {
            if (found != nullptr)
                pfree(found);
            found = pnstrdup(line + name_len + 1, line_len - name_len - 1);
        }
        line += line_len + (end ? 1 : 0);
    }
    return found;
}

void note_refused_remembered_settings(void)
{
    if (remembered != nullptr)
        note_refused_database_settings(remembered);
}

void leave_if_database_settings_changed(void)
{
    char* now = read_database_settings();
    bool changed = remembered != nullptr && strcmp(now, remembered) != 0;
    pfree(now);
    if (!changed)
        return;
    ereport(LOG,
            (errmsg("jobbuf: the jobbuf settings of database \"%s\" changed; its drain worker restarts to apply them",
                    drain_database_name())));
    shared_state_note_exit(WorkerExit::SettingsChanged);
    proc_exit(0);
}
