// Postgres regime: jobbuf_cluster_nodes(), the nodes of the Redis Cluster this session's
// jobbuf.redis_url names (the database's own setting, as its worker uses it): one row per node
// and hash slot range, with its role and health, asked of the cluster at the call
// (redis/cluster/cluster_inspection.h).
#include "pg_includes.h"

#include "config/settings.h"
#include "redis/cluster/cluster_inspection.h"
#include "worker/latch_io_waiter.h"

extern "C" {
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

namespace {

constexpr std::size_t kMaxRows = 4096;
constexpr int kColumns = 6;  // node, node_id, role, health, slot_first, slot_last

}  // namespace

extern "C" {
PG_FUNCTION_INFO_V1(jobbuf_cluster_nodes);
}

extern "C" Datum jobbuf_cluster_nodes(PG_FUNCTION_ARGS)
{
    char password[1024];
    char error[256];
    if (!read_redis_password(password, sizeof(password), error, sizeof(error)))
        ereport(ERROR, (errcode(ERRCODE_CONFIG_FILE_ERROR), errmsg("jobbuf: %s", error)));
    char client_name[64];
    snprintf(client_name, sizeof(client_name), "jobbuf-inspection-%d", MyProcPid);
    jobbuf::redis::SessionSettings settings = redis_session_settings(password, "", client_name);

    auto* rows = static_cast<jobbuf::redis::ClusterNodeRow*>(palloc0(sizeof(jobbuf::redis::ClusterNodeRow) * kMaxRows));
    std::size_t count = 0;
    void* waiter_memory = palloc(sizeof(LatchIoWaiter));
    LatchIoWaiter* waiter = new (waiter_memory) LatchIoWaiter();
    jobbuf::redis::SessionReport report = jobbuf::redis::cluster_node_rows(settings, *waiter, rows, kMaxRows, &count);
    waiter->raise_pending();
    if (report.status != jobbuf::redis::SessionReport::Status::Ok)
        ereport(ERROR, (errcode(report.status == jobbuf::redis::SessionReport::Status::BadConfig
                                    ? ERRCODE_INVALID_PARAMETER_VALUE
                                    : ERRCODE_CONNECTION_FAILURE),
                        errmsg("jobbuf: %s", report.message)));

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    InitMaterializedSRF(fcinfo, 0);
    for (std::size_t i = 0; i < count; i++) {
        Datum values[kColumns];
        bool nulls[kColumns] = {false, false, false, false, false, false};
        values[0] = CStringGetTextDatum(rows[i].address);
        values[1] = CStringGetTextDatum(rows[i].id);
        nulls[1] = rows[i].id[0] == '\0';
        values[2] = CStringGetTextDatum(rows[i].role);
        values[3] = CStringGetTextDatum(rows[i].health);
        values[4] = Int32GetDatum(rows[i].slot_first);
        values[5] = Int32GetDatum(rows[i].slot_last);
        nulls[4] = nulls[5] = rows[i].slot_first < 0;
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}
