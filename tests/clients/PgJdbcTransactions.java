import java.sql.BatchUpdateException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;

/**
 * pgjdbc with autocommit off: its BEGIN travels in the same pipeline as the first statement,
 * rollback() discards, a savepoint undoes part of a transaction, and a batch that fails part
 * way leaves nothing once rolled back. A second connection checks what others see.
 *
 * <p>Usage: java -cp postgresql.jar:. PgJdbcTransactions PORT
 */
public class PgJdbcTransactions {
    public static void main(String[] args) throws SQLException {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/postgres";
        try (Connection conn = DriverManager.getConnection(url, "postgres", "");
                Connection other = DriverManager.getConnection(url, "postgres", "")) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE tj (k BIGINT, v STRING) USING parquet CLUSTERED BY (k) INTO 4 BUCKETS");
            }
            conn.setAutoCommit(false);
            try (PreparedStatement insert = conn.prepareStatement("INSERT INTO tj VALUES (?, ?)")) {
                insert.setLong(1, 1);
                insert.setString(2, "rolled back");
                insert.executeUpdate();
                expect(count(conn), 1L, "own row before rollback");
                expect(count(other), 0L, "another session before commit");
                conn.rollback();
                expect(count(conn), 0L, "after rollback");

                insert.setLong(1, 2);
                insert.setString(2, "kept");
                insert.executeUpdate();
                Savepoint savepoint = conn.setSavepoint("part");
                insert.setLong(1, 3);
                insert.setString(2, "undone");
                insert.executeUpdate();
                conn.rollback(savepoint);
                conn.commit();
                expect(keys(other), "2", "after a rollback to the savepoint and commit");

                try (Statement st = conn.createStatement()) {
                    st.addBatch("INSERT INTO tj VALUES (4, 'batch')");
                    st.addBatch("INSERT INTO missing_table VALUES (5)");
                    st.addBatch("INSERT INTO tj VALUES (6, 'after the error')");
                    st.executeBatch();
                    throw new AssertionError("a batch with a missing table succeeded");
                } catch (BatchUpdateException e) {
                    expect(e.getSQLState(), "42P01", "the batch's error");
                }
                try (Statement st = conn.createStatement()) {
                    st.executeQuery("SELECT 1");
                    throw new AssertionError("a statement ran in a failed transaction");
                } catch (SQLException e) {
                    expect(e.getSQLState(), "25P02", "a statement after the failed batch");
                }
                conn.rollback();
                expect(keys(other), "2", "after the failed batch was rolled back");
            }
            conn.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            expect(count(conn), 1L, "first read of a repeatable read transaction");
            try (Statement st = other.createStatement()) {
                st.execute("INSERT INTO tj VALUES (7, 'committed meanwhile')");
            }
            expect(count(conn), 1L, "the snapshot after another session committed");
            conn.commit();
            expect(count(conn), 2L, "a new transaction");
            conn.commit();
        }
        System.out.println("pgjdbc: transactions as expected");
    }

    static long count(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM tj")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    static String keys(Connection conn) throws SQLException {
        StringBuilder keys = new StringBuilder();
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT k FROM tj ORDER BY k")) {
            while (rs.next()) {
                keys.append(keys.length() == 0 ? "" : ",").append(rs.getLong(1));
            }
        }
        return keys.toString();
    }

    static void expect(Object got, Object want, String what) {
        if (!got.equals(want)) {
            throw new AssertionError(what + ": got " + got + ", want " + want);
        }
    }
}
