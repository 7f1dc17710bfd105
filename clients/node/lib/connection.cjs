// Runs one SQL statement on the connection of the caller's transaction, whatever library holds
// it: a node-postgres Client / PoolClient, a Knex transaction (trx), a Drizzle transaction (tx),
// a Sequelize transaction or a TypeORM EntityManager / QueryRunner. SQL is written with $1..$n
// placeholders; values always travel as bind parameters. A pool (pg.Pool, the root Knex or
// Drizzle object, TypeORM's dataSource.manager) is refused: it runs each statement on any of its
// connections, never inside the caller's transaction.
'use strict';

class JobbufConnectionError extends TypeError {}

function isPgPool(c) {
  return c != null && typeof c.connect === 'function' && typeof c.query === 'function' &&
    'totalCount' in c && 'idleCount' in c;
}

function refusePool(what, instead) {
  throw new JobbufConnectionError(
    `jobbuf: stage() got ${what}, which runs each statement on any of its connections, outside ` +
    `your transaction: pass ${instead}`);
}

// pgRunner(client) -> async (sql, params) => rows
function pgRunner(client) {
  return async (sql, params) => (await client.query(sql, params)).rows;
}

function runnerFor(client) {
  if (client == null) throw new JobbufConnectionError('jobbuf: stage() needs the connection of your transaction, got ' + client);

  // Knex: the knex object and its transactions are functions with raw(); only a transaction
  // (isTransaction) pins one connection. Knex binds "?" placeholders.
  if (typeof client === 'function' && typeof client.raw === 'function') {
    if (!client.isTransaction) refusePool('the Knex instance', 'the trx of knex.transaction(async (trx) => ...)');
    return async (sql, params) => {
      const result = await client.raw(sql.replace(/\$\d+/g, '?'), params);
      return result.rows;
    };
  }

  // Sequelize: a Transaction knows its sequelize instance; bind parameters are $1..$n.
  if (client.sequelize && typeof client.sequelize.query === 'function' && 'id' in client) {
    return async (sql, params) => client.sequelize.query(sql, { bind: params, transaction: client, type: 'SELECT', raw: true });
  }

  // Drizzle (drizzle-orm/node-postgres): a transaction's session holds the PoolClient or
  // Client its BEGIN ran on; the root db's session holds the pool.
  if (client.session && client.session.client && typeof client.session.client.query === 'function' &&
      typeof client.transaction === 'function') {
    if (isPgPool(client.session.client)) refusePool('the Drizzle database object', 'the tx of db.transaction(async (tx) => ...)');
    return pgRunner(client.session.client);
  }

  // TypeORM: an EntityManager bound to a transaction's QueryRunner, or a QueryRunner itself
  // (its query() resolves to the rows of a SELECT).
  const isQueryRunner = (c) => c != null && typeof c.query === 'function' &&
    typeof c.startTransaction === 'function' && 'isTransactionActive' in c;
  if (client['@instanceof'] === Symbol.for('EntityManager') || isQueryRunner(client)) {
    const runner = isQueryRunner(client) ? client : client.queryRunner;
    if (!runner) refusePool("TypeORM's dataSource.manager", 'the manager of dataSource.transaction(async (manager) => ...)');
    return async (sql, params) => runner.query(sql, params);
  }

  if (isPgPool(client)) refusePool('a pg.Pool', 'the client of `const client = await pool.connect()` after client.query("BEGIN")');
  if (typeof client.query === 'function') return pgRunner(client);

  throw new JobbufConnectionError(
    'jobbuf: stage() takes a node-postgres Client or PoolClient, or the transaction object of Knex, ' +
    'Drizzle, Sequelize or TypeORM; got ' + Object.prototype.toString.call(client));
}

module.exports = { runnerFor, JobbufConnectionError };
