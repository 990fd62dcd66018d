import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * pgjdbc against bucketsql: PreparedStatements (server-prepared with binary results after the
 * fifth execution), EXPLAIN FORMATTED, SQLSTATEs and DatabaseMetaData.
 *
 * <p>Usage: java -cp postgresql.jar:. PgJdbc PORT
 */
public class PgJdbc {
    static final List<Object[]> ROWS = List.of(
            new Object[] {1L, "one", new BigDecimal("1.50"), LocalDate.of(2024, 1, 15)},
            new Object[] {2L, "two", new BigDecimal("20.25"), LocalDate.of(2024, 2, 29)},
            new Object[] {3L, null, null, null});

    public static void main(String[] args) throws SQLException {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/postgres";
        try (Connection conn = DriverManager.getConnection(url, "postgres", "")) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE t (k BIGINT, v STRING, price DECIMAL(10,2), day DATE) USING parquet "
                        + "CLUSTERED BY (k) SORTED BY (k) INTO 4 BUCKETS");
            }
            try (PreparedStatement insert = conn.prepareStatement("INSERT INTO t VALUES (?, ?, ?, ?)")) {
                for (Object[] row : ROWS) {
                    insert.setLong(1, (Long) row[0]);
                    insert.setString(2, (String) row[1]);
                    insert.setBigDecimal(3, (BigDecimal) row[2]);
                    insert.setObject(4, row[3], Types.DATE);
                    expect(insert.executeUpdate(), 1, "INSERT row count");
                }
            }

            try (PreparedStatement select = conn.prepareStatement("SELECT k, v, price, day FROM t WHERE k = ?")) {
                for (int i = 0; i < 8; i++) {
                    Object[] row = ROWS.get(i % 3);
                    select.setLong(1, (Long) row[0]);
                    try (ResultSet rs = select.executeQuery()) {
                        expect(rows(rs), List.of(Arrays.asList(row)), "SELECT execution " + (i + 1));
                    }
                }
            }

            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(
                    "EXPLAIN FORMATTED SELECT k, v FROM t WHERE k = 2")) {
                ResultSetMetaData md = rs.getMetaData();
                expect(md.getColumnCount(), 1, "EXPLAIN column count");
                expect(md.getColumnName(1), "plan", "EXPLAIN column name");
                expect(rs.next(), true, "EXPLAIN has a row");
                String plan = rs.getString(1);
                expect(plan.startsWith("== Physical Plan ==\n"), true, "plan starts with == Physical Plan ==:\n" + plan);
                expect(plan.contains("Scan parquet spark_catalog.default.t"), true, "plan names the scan:\n" + plan);
                expect(rs.next(), false, "EXPLAIN has one row");
            }

            try (Statement st = conn.createStatement()) {
                try {
                    st.executeQuery("SELECT * FROM missing");
                    throw new AssertionError("expected an error for a missing table");
                } catch (SQLException e) {
                    expect(e.getSQLState(), "42P01", "SQLSTATE of a missing table");
                }
                try (ResultSet rs = st.executeQuery("SELECT count(*) FROM t")) {
                    expect(rows(rs), List.of(List.of(3L)), "count after the error");
                }
            }

            DatabaseMetaData meta = conn.getMetaData();
            try (ResultSet rs = meta.getTables(null, null, "t", new String[] {"TABLE"})) {
                List<List<Object>> tables = new ArrayList<>();
                while (rs.next()) {
                    tables.add(List.of(rs.getString("TABLE_SCHEM"), rs.getString("TABLE_NAME"), rs.getString("TABLE_TYPE")));
                }
                expect(tables, List.of(List.of("default", "t", "TABLE")), "getTables");
            }
            try (ResultSet rs = meta.getColumns(null, null, "t", null)) {
                List<List<Object>> columns = new ArrayList<>();
                while (rs.next()) {
                    columns.add(List.of(rs.getString("COLUMN_NAME"), rs.getInt("DATA_TYPE"), rs.getString("TYPE_NAME"),
                            rs.getInt("COLUMN_SIZE"), rs.getInt("DECIMAL_DIGITS"), rs.getInt("ORDINAL_POSITION")));
                }
                expect(columns, List.of(
                        List.of("k", Types.BIGINT, "int8", 19, 0, 1),
                        List.of("v", Types.VARCHAR, "text", Integer.MAX_VALUE, 0, 2),
                        List.of("price", Types.NUMERIC, "numeric", 10, 2, 3),
                        List.of("day", Types.DATE, "date", 13, 0, 4)), "getColumns");
            }
        }
        System.out.println("pgjdbc ok");
    }

    /** Every row as Java objects of the types pgjdbc maps the columns to. */
    static List<List<Object>> rows(ResultSet rs) throws SQLException {
        int n = rs.getMetaData().getColumnCount();
        List<List<Object>> rows = new ArrayList<>();
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            for (int i = 1; i <= n; i++) {
                row.add(rs.getMetaData().getColumnType(i) == Types.DATE ? rs.getObject(i, LocalDate.class) : rs.getObject(i));
            }
            rows.add(row);
        }
        return rows;
    }

    static void expect(Object actual, Object expected, String what) {
        if (!Objects.equals(actual, expected)) {
            throw new AssertionError(what + ": got " + actual + ", expected " + expected);
        }
    }
}
