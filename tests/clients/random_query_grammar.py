"""The grammar of random_queries.py: random SQL queries over the tables of random_query_data.py,
each written twice from one generator, once as bucketsql reads it and once as DuckDB reads it.

Both engines get the same query; where their dialects differ (CAST of a DOUBLE to an integer
truncates in Spark and rounds in DuckDB, Spark's `range(n)` names its column `id`, DuckDB's
`range`), the text differs so that the meaning does not. A query records the constructs it uses
(`tags`), whether its ORDER BY fixes the order of every row (`ordered`), and never holds a LIMIT
whose rows depend on how ties are broken.
"""
import random

from random_query_data import BASE_COLUMNS, literal

NUMERIC = ('int', 'bigint', 'double', 'decimal')
# Joined or aggregated results above this many (estimated) rows are aggregated before they are
# returned, to keep each query cheap to compare.
MAX_RETURNED = 5000
# Joins estimated to make more rows than this are not generated.
MAX_JOINED = 150000
# Distinct values of each base column, for row estimates.
# Distinct values of each base column (skew included), of counts, and of window results (which
# are mostly 1 for ranks in small partitions), for row estimates.
NDV = {'id': 1, 'k': 120, 'j': 250, 's': 20, 'v': 2000, 'd': 90, 'p': 4, 'count': 20, 'window': 3}
AGGREGATES = ('count(', 'sum(', 'avg(', 'min(', 'max(', 'grouping(')


class Sql:
    """One piece of SQL as each engine reads it."""

    def __init__(self, bs, dk=None):
        self.bs = bs
        self.dk = bs if dk is None else dk

    def __repr__(self):
        return self.bs


def sql(template, *parts):
    """`template` with each `{}` filled by a part (a str, or Sql differing per engine)."""
    parts = [p if isinstance(p, Sql) else Sql(str(p)) for p in parts]
    return Sql(template.format(*(p.bs for p in parts)), template.format(*(p.dk for p in parts)))


def join_sql(sep, parts):
    parts = [p if isinstance(p, Sql) else Sql(str(p)) for p in parts]
    return Sql(sep.join(p.bs for p in parts), sep.join(p.dk for p in parts))


class Rel:
    """A FROM item: its SQL, its alias, its columns (name, type), a unique key if known, an
    estimate of its rows, the columns that hold window results, and the constructs it uses."""

    def __init__(self, from_sql, alias, cols, ukey, est, tags=(), wcols=(), origin=None):
        self.from_sql = from_sql
        self.alias = alias
        self.cols = list(cols)
        self.ukey = ukey
        self.est = max(1, int(est))
        self.tags = set(tags)
        self.wcols = set(wcols)
        # The table column (or 'count') each column's values come from, where known.
        self.origin = origin or {n: n for n, _ in self.cols}

    def ref(self, name):
        return f'{self.alias}.{name}'

    def typed(self, types):
        return [(self.ref(n), t, self.origin.get(n)) for n, t in self.cols if t in types]


class Query:
    """A whole query: its SQL, output column types, whether rows come in a fixed order, tags, an
    estimate of its rows and where its columns' values come from."""

    def __init__(self, text, types, ordered, tags, est, origins=None):
        self.text = text
        self.origins = origins or [None] * len(types)
        self.types = types
        self.ordered = ordered
        self.tags = set(tags)
        self.est = est
        # For a query that casts every row: DuckDB's count of values the cast cannot convert.
        self.unconvertible = None


class Generator:
    def __init__(self, seed, tables):
        self.r = random.Random(seed)
        self.tables = tables  # name -> row count
        self.n = 0
        self.ctes = []

    # ---- small helpers
    def chance(self, p):
        return self.r.random() < p

    def alias(self, prefix='t'):
        self.n += 1
        return f'{prefix}{self.n}'

    def pick(self, seq):
        return self.r.choice(list(seq))

    # ---- scalar expressions
    def lit(self, t):
        return literal(self.r, t)

    def expr(self, cols, want=None, tags=None, depth=0):
        """A scalar expression over `cols` [(ref, type, name)], of type `want` if given: (Sql, type)."""
        tags = set() if tags is None else tags
        cands = [c for c in cols if want is None or c[1] == want or (want == 'num' and c[1] in NUMERIC)]
        if not cands:
            return None
        ref, t, name = self.pick(cands)
        x = Sql(ref)
        if depth > 1 or self.chance(0.6):
            return x, t
        roll = self.r.random()
        if t in ('int', 'bigint') and roll < 0.35:
            op = self.pick(['+ 1', '* 3', '% 7', '- 5'])
            other = [c for c in cols if c[1] in ('int', 'bigint') and c[0] != ref]
            if other and self.chance(0.3):
                o = self.pick(other)
                return sql('({} + {})', x, o[0]), 'bigint' if 'bigint' in (t, o[1]) else 'int'
            return sql('({} {})', x, op), t
        if t in NUMERIC and roll < 0.6:
            tags.add('cast')
            if t == 'double' and want in (None, 'int', 'bigint', 'num'):
                # Spark truncates toward zero, DuckDB rounds. Only v is small enough for INT.
                target = 'INT' if name == 'v' and want != 'bigint' else 'BIGINT'
                if want in ('int', 'bigint') and want != target.lower():
                    return x, t
                return Sql(f'CAST({ref} AS {target})', f'CAST(trunc({ref}) AS {target})'), target.lower()
            target = self.pick(['BIGINT', 'DOUBLE', 'DECIMAL(14,2)'] if t == 'int' else ['DOUBLE', 'DECIMAL(20,2)'])
            new_t = {'BIGINT': 'bigint', 'DOUBLE': 'double'}.get(target, 'decimal')
            if want not in (None, 'num', new_t):
                return x, t
            return sql(f'CAST({{}} AS {target})', x), new_t
        if t == 'double' and roll < 0.8:
            return sql(self.pick(['({} * 2)', '(- {})', 'abs({})', '({} + 0.5)']), x), t
        if t == 'str' and roll < 0.8:
            return sql("({} || 'x')", x), t
        if t == 'date' and want in (None, 'str') and roll < 0.8:
            tags.add('cast')
            return Sql(f'CAST({ref} AS STRING)', f'CAST({ref} AS VARCHAR)'), 'str'
        if roll < 0.9:
            return sql('coalesce({}, {})', x, self.lit(t)), t
        return sql('CASE WHEN {} IS NULL THEN {} ELSE {} END', x, self.lit(t), x), t

    def compare_value(self, cols, t, tags):
        """Something to compare with a value of type t: a literal or another column."""
        if self.chance(0.8):
            return self.lit(t)
        e = self.expr(cols, 'num' if t in NUMERIC else t, tags)
        return e[0] if e else self.lit(t)

    def pred(self, cols, tags, depth=0):
        """A boolean condition over `cols`."""
        roll = self.r.random()
        if depth < 2 and roll < 0.15:
            op = self.pick(['AND', 'OR', 'OR'])
            tags.add(op.lower())
            return sql(f'({{}} {op} {{}})', self.pred(cols, tags, depth + 1), self.pred(cols, tags, depth + 1))
        if depth < 2 and roll < 0.19:
            return sql('NOT ({})', self.pred(cols, tags, depth + 1))
        x, t = self.expr(cols, tags=tags)
        t_lit = 'double' if t == 'decimal' else t
        roll = self.r.random()
        if roll < 0.4:
            op = self.pick(['=', '<>', '<', '<=', '>', '>='])
            return sql(f'{{}} {op} {{}}', x, self.compare_value(cols, t_lit, tags))
        if roll < 0.55:
            items = [self.lit(t_lit) for _ in range(self.r.randint(1, 5))]
            negate = self.chance(0.35)
            if negate and self.chance(0.2):
                items.append(sql('CAST(NULL AS {})', cast_name(t_lit)))
            tags.add('in-list')
            return sql(f'{{}} {"NOT IN" if negate else "IN"} ({", ".join("{}" for _ in items)})', x, *items)
        if roll < 0.72:
            return sql(f'{{}} IS {self.pick(["", "NOT "])}NULL', x)
        if roll < 0.85 and t_lit != 'str':
            lo, hi = sorted([self.lit(t_lit), self.lit(t_lit)], key=sort_key)
            return sql(f'{{}} {self.pick(["", "NOT "])}BETWEEN {{}} AND {{}}', x, lo, hi)
        if t == 'str':
            return sql("{} LIKE '{}%'", x, self.pick(['a', 'b', 'x', 'Z', '']))
        return sql('{} >= {}', x, self.lit(t_lit))

    # ---- aggregates
    def agg(self, cols, tags):
        """An aggregate over `cols`: (Sql, type)."""
        roll = self.r.random()
        if roll < 0.2 or not cols:
            return Sql('count(*)'), 'bigint'
        num = [c for c in cols if c[1] in NUMERIC]
        if roll < 0.55 and num:
            x, t = self.expr(num, 'num', tags)
            fn = self.pick(['sum', 'sum', 'avg'] if t != 'decimal' else ['sum'])
            if fn == 'sum' and self.chance(0.1):
                tags.add('distinct-agg')
                return sql('sum(DISTINCT {})', x), t
            return sql(f'{fn}({{}})', x), ('double' if fn == 'avg' else t)
        x, t = self.expr(cols, tags=tags)
        if roll < 0.7:
            tags.add('distinct-agg')
            return sql('count(DISTINCT {})', x), 'bigint'
        if roll < 0.8:
            return sql('count({})', x), 'bigint'
        return sql(f'{self.pick(["min", "max"])}({{}})', x), t

    # ---- relations
    def table(self, name=None):
        name = name or self.pick_table()
        a = self.alias()
        return Rel(Sql(f'{name} AS {a}'), a, BASE_COLUMNS, ['id'], self.tables[name], tags=[f'table:{name}'])

    def pick_table(self):
        return self.pick(sorted(self.tables))

    def values_leaf(self):
        a = self.alias('v')
        cols = [('id', 'bigint'), ('k', 'int'), ('j', 'bigint'), ('s', 'str'), ('v', 'double')]
        rows = []
        for i in range(self.r.randint(1, 8)):
            vals = [Sql(str(1000000 + i))] + [typed_literal(self.r, t) for _, t in cols[1:]]
            rows.append(sql('(' + ', '.join('{}' for _ in vals) + ')', *vals))
        body = join_sql(', ', rows)
        names = ', '.join(n for n, _ in cols)
        return Rel(sql(f'(VALUES {{}}) AS {a}({names})', body), a, cols, ['id'], len(rows), tags=['values'])

    def range_leaf(self):
        a = self.alias('r')
        n = self.r.choice([0, 1, 5, 40, 300])
        select = 'SELECT id, CAST(id % 37 AS INT) AS k, id * 3 AS j, CAST(id AS DOUBLE) * 0.5 AS v FROM {}'
        src = Sql(f'range({n}) AS rg', f'(SELECT range AS id FROM range({n})) AS rg')
        cols = [('id', 'bigint'), ('k', 'int'), ('j', 'bigint'), ('v', 'double')]
        return Rel(sql(f'({select}) AS {a}', src), a, cols, ['id'], n, tags=['range'])

    def leaf(self):
        roll = self.r.random()
        if roll < 0.05:
            return self.values_leaf()
        if roll < 0.09:
            return self.range_leaf()
        if roll < 0.14 and self.ctes:
            name, cols, ukey, est = self.pick(self.ctes)
            a = self.alias()
            return Rel(Sql(f'{name} AS {a}'), a, cols, ukey, est, tags=['cte'])
        return self.table()

    def rel(self, depth):
        """A FROM item: mostly a table, sometimes a subquery (filtered, aggregated, windowed, joined)."""
        roll = self.r.random()
        if depth <= 0 or roll < 0.55:
            return self.leaf()
        if roll < 0.7:
            return self.filtered(self.leaf())
        if roll < 0.8:
            return self.subquery(self.select_block(depth - 1, mode='group'))
        if roll < 0.92:
            return self.window_rel(self.rel(depth - 1))
        return self.subquery(self.select_block(depth - 1, mode='plain'))

    def filtered(self, base):
        tags = set(base.tags)
        inner = base.typed(NUMERIC + ('str', 'date'))
        keep = [c for c in base.cols if c[0] in ('id', 'k') or self.chance(0.6)]
        a = self.alias('f')
        body = sql(f'SELECT {", ".join(base.ref(n) + " AS " + n for n, _ in keep)} FROM {{}} WHERE {{}}',
                   base.from_sql, self.pred(inner, tags))
        return Rel(sql(f'({{}}) AS {a}', body), a, keep, base.ukey if 'id' in dict(keep) else None,
                   base.est / 2, tags, base.wcols & {n for n, _ in keep}, base.origin)

    def subquery(self, q):
        """A select block (whose columns are named c0, c1, ...) as a FROM item."""
        a = self.alias('q')
        cols = [(f'c{i}', t) for i, t in enumerate(q.types)]
        ukey = [f'c{i}' for i in range(len(q.types))] if 'unique-rows' in q.tags else None
        return Rel(sql(f'({{}}) AS {a}', q.text), a, cols, ukey, q.est, q.tags - {'unique-rows'},
                   origin={n: o for (n, _), o in zip(cols, q.origins)})

    def window_fn(self, rel, tags, coarse=False):
        """One window function over rel: (Sql, type). Coarse: partitioned by nothing or p, so
        that ranks spread over many values."""
        cols = rel.typed(NUMERIC + ('str', 'date'))
        parts = [c for c in cols if c[2] in (('p',) if coarse else ('k', 'j', 's', 'p', 'd'))] or ([] if coarse else cols)
        part = self.r.sample(parts, k=min(len(parts), self.r.choice([0, 1] if coarse else [0, 1, 1, 1, 2])))
        by = f'PARTITION BY {", ".join(p[0] for p in part)} ' if part else ''
        order_col = self.pick(cols)
        order = f'{order_col[0]} {self.pick(["ASC", "DESC"])} NULLS {self.pick(["FIRST", "LAST"])}'
        unique = f', {", ".join(rel.ref(u) + " ASC NULLS LAST" for u in rel.ukey)}' if rel.ukey else None
        tags.add('window')
        fns = ['rank', 'dense_rank', 'sum', 'count']
        if unique:
            fns += ['row_number', 'row_number', 'lag', 'sum-rows']
        fn = self.pick(fns)
        if fn in ('rank', 'dense_rank'):
            return Sql(f'{fn}() OVER ({by}ORDER BY {order})'), 'bigint'
        if fn == 'row_number':
            return Sql(f'row_number() OVER ({by}ORDER BY {order}{unique})'), 'bigint'
        num = [c for c in cols if c[1] in ('int', 'bigint', 'double')]
        x = self.pick(num) if num else None
        if fn == 'count' or x is None:
            if self.chance(0.5):
                return Sql(f'count(*) OVER ({by.strip()})'), 'bigint'
            return Sql(f'count(*) OVER ({by}ORDER BY {order})'), 'bigint'
        if fn == 'lag':
            return Sql(f'lag({x[0]}) OVER ({by}ORDER BY {order}{unique})'), x[1]
        if fn == 'sum-rows':
            return Sql(f'sum({x[0]}) OVER ({by}ORDER BY {order}{unique} ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)'), \
                'double' if x[1] == 'double' else 'bigint'
        if self.chance(0.3):
            return Sql(f'{self.pick(["sum", "min", "max"])}({x[0]}) OVER ({by.strip()})'), x[1]
        return Sql(f'sum({x[0]}) OVER ({by}ORDER BY {order})'), 'double' if x[1] == 'double' else 'bigint'

    def window_rel(self, base, coarse=False):
        """`SELECT base columns, window functions AS w<n>.. FROM base`."""
        tags = set(base.tags)
        a = self.alias('w')
        keep = [c for c in base.cols if c[0] in ('id', 'k', 'j') or self.chance(0.5)]
        fns = [(f'w{self.n}_{i}', *self.window_fn(base, tags, coarse)) for i in range(self.r.randint(1, 2))]
        items = [sql(f'{base.ref(n)} AS {n}') for n, _ in keep] + [sql(f'{{}} AS {name}', f) for name, f, _ in fns]
        body = sql('SELECT {} FROM {}', join_sql(', ', items), base.from_sql)
        cols = keep + [(name, t) for name, _, t in fns]
        kept = {n for n, _ in keep}
        return Rel(sql(f'({{}}) AS {a}', body), a, cols, base.ukey if base.ukey and set(base.ukey) <= kept else None,
                   base.est, tags, {name for name, _, _ in fns} | (base.wcols & kept),
                   dict(base.origin, **{name: 'window' for name, _, _ in fns}))

    def small_rel(self):
        """A relation of a few rows, for the side of a cross join."""
        roll = self.r.random()
        if roll < 0.3:
            return self.values_leaf()
        if roll < 0.5:
            rel = self.range_leaf()
            return rel if rel.est <= 40 else self.values_leaf()
        base = self.table()
        a = self.alias('f')
        tags = set(base.tags)
        m = self.r.choice([97, 131, 211])
        items = ", ".join(base.ref(n) + " AS " + n for n, _ in base.cols)
        body = sql(f'SELECT {items} FROM {{}} WHERE {base.ref("id")} % {m} = {self.r.randint(0, 5)}', base.from_sql)
        if self.chance(0.3):
            tags.add('filter')
            body = sql('{} AND {}', body, self.pred(base.typed(NUMERIC + ('str', 'date')), tags))
        return Rel(sql(f'({{}}) AS {a}', body), a, base.cols, ['id'], base.est / m, tags)

    # ---- joins
    def ndv(self, rel, name):
        """Estimated distinct values of a column of rel."""
        name = rel.origin.get(name)
        if name == 'id' and rel.ukey == ['id']:
            return rel.est
        if name in NDV:
            return min(NDV[name], rel.est)
        return max(5, rel.est // 3)

    def join_condition(self, left_rels, right, est):
        """An ON condition between `right` and one of `left_rels` (whose join has `est` rows):
        (Sql, estimated rows of the join, tags), or None when the two have no comparable columns."""
        tags = set()
        left = self.pick(left_rels)
        lcols, rcols = dict(left.cols), dict(right.cols)
        pairs = [(a, b) for a in lcols for b in rcols
                 if (lcols[a] == rcols[b] or {lcols[a], rcols[b]} <= {'int', 'bigint'}) and lcols[a] != 'double'
                 and 'p' not in (left.origin.get(a), right.origin.get(b))]
        wkey = [(a, b) for a, b in pairs if a in left.wcols or b in right.wcols]
        keyed = [(a, b) for a, b in pairs if a == b and a in ('k', 'j', 's', 'id', 'd')] or pairs
        if wkey and self.chance(0.6):
            a, b = self.pick(wkey)
            tags.add('window-key')
        elif self.chance(0.15) and {'k', 'j'} <= set(lcols) and {'k', 'j'} <= set(rcols):
            tags.add('two-key-join')
            cond = sql(f'{left.ref("k")} = {right.ref("k")} AND {left.ref("j")} = {right.ref("j")}')
            return self.extra_condition(cond, left, right, tags), est * right.est / 500, tags
        elif keyed:
            a, b = self.pick(keyed if self.chance(0.8) else pairs)
        else:
            return None
        la, rb = left.ref(a), right.ref(b)
        rows = est * right.est / max(self.ndv(left, a), self.ndv(right, b))
        roll = self.r.random()
        if roll < 0.12:
            tags.add('null-safe-join')
            cond = sql(f'{la} IS NOT DISTINCT FROM {rb}')
            rows += est * right.est * 0.01
        elif roll < 0.27 and lcols[a] in ('int', 'bigint') and rcols[b] in ('int', 'bigint'):
            tags.add('cast-key')
            cond = sql(f'CAST({la} AS BIGINT) = CAST({rb} AS {self.pick(["BIGINT", "DOUBLE", "DECIMAL(20,0)"])})')
        elif roll < 0.35 and lcols[a] in ('int', 'bigint') and rcols[b] in ('int', 'bigint'):
            tags.add('expression-key')
            cond = sql(f'{la} + 1 = {rb}')
        else:
            cond = sql(f'{la} = {rb}')
        return self.extra_condition(cond, left, right, tags), rows, tags

    def extra_condition(self, cond, left, right, tags):
        if self.chance(0.2):
            ln = [c for c in left.typed(('int', 'bigint', 'double'))]
            rn = [c for c in right.typed(('int', 'bigint', 'double'))]
            if ln and rn:
                tags.add('non-equi')
                return sql(f'{{}} AND {self.pick(ln)[0]} {self.pick(["<", ">=", "<>"])} {self.pick(rn)[0]}', cond)
        if self.chance(0.1):
            return sql('{} AND {}', cond, self.pred(right.typed(NUMERIC + ('str', 'date')), tags))
        return cond

    def from_clause(self, depth, n_rels):
        """FROM with 1-3 relations joined: (Sql, rels, est, tags). Joins that would make more
        than MAX_JOINED rows are not added."""
        tags = set()
        first = self.rel(depth)
        rels, text, est = [first], first.from_sql, first.est
        for _ in range(n_rels - 1):
            kind = self.pick(['JOIN', 'JOIN', 'LEFT JOIN', 'RIGHT JOIN', 'FULL OUTER JOIN', 'CROSS JOIN', 'LEFT OUTER JOIN',
                              'INNER JOIN'])
            if kind == 'CROSS JOIN':
                right = self.small_rel()
                if est * right.est > MAX_JOINED:
                    continue
                tags.add('cross-join')
                tags |= right.tags
                rels.append(right)
                text = sql('{} CROSS JOIN {}', text, right.from_sql)
                est = est * right.est
                continue
            for _ in range(4):
                right = self.rel(depth)
                found = self.join_condition(rels, right, est)
                if found is not None and found[1] <= MAX_JOINED:
                    break
            else:
                continue
            cond, rows, join_tags = found
            tags |= join_tags | right.tags
            tags.add({'LEFT JOIN': 'left-join', 'LEFT OUTER JOIN': 'left-join', 'RIGHT JOIN': 'right-join',
                      'FULL OUTER JOIN': 'full-join'}.get(kind, 'inner-join'))
            rels.append(right)
            text = sql(f'{{}} {kind} {{}} ON {{}}', text, right.from_sql, cond)
            outer_rows = (est if kind not in ('JOIN', 'INNER JOIN') else 0) + (right.est if kind in ('RIGHT JOIN', 'FULL OUTER JOIN') else 0)
            est = rows + outer_rows
        if len(rels) > 2:
            tags.add('multi-join')
        tags |= first.tags
        return text, rels, est, tags

    def semi_predicate(self, rels, depth, tags):
        """EXISTS / NOT EXISTS / IN / NOT IN / scalar subquery against another relation."""
        outer = self.pick(rels)
        inner = self.rel(max(0, depth - 1))
        tags |= inner.tags
        ocols, icols = dict(outer.cols), dict(inner.cols)
        pairs = [(a, b) for a in ocols for b in icols
                 if (ocols[a] == icols[b] or {ocols[a], icols[b]} <= {'int', 'bigint'}) and ocols[a] != 'double']
        if not pairs:
            return None
        a, b = self.pick([p for p in pairs if p[0] == p[1]] or pairs)
        where = self.pred(inner.typed(NUMERIC + ('str', 'date')), tags) if self.chance(0.5) else None
        roll = self.r.random()
        if roll < 0.4:
            neg = self.chance(0.5)
            tags.add('anti-join' if neg else 'semi-join')
            cond = sql(f'{inner.ref(b)} = {outer.ref(a)}')
            if where is not None:
                cond = sql('{} AND {}', cond, where)
            return sql(f'{"NOT " if neg else ""}EXISTS (SELECT 1 FROM {{}} WHERE {{}})', inner.from_sql, cond)
        if roll < 0.85:
            neg = self.chance(0.5)
            tags.add('not-in' if neg else 'semi-join')
            if neg and self.chance(0.5):
                not_null = sql(f'{inner.ref(b)} IS NOT NULL')
                where = not_null if where is None else sql('{} AND {}', where, not_null)
            w = sql(' WHERE {}', where) if where is not None else ''
            return sql(f'{outer.ref(a)} {"NOT IN" if neg else "IN"} (SELECT {inner.ref(b)} FROM {{}}{{}})', inner.from_sql, w)
        num_o = outer.typed(('int', 'bigint', 'double'))
        num_i = inner.typed(('int', 'bigint', 'double'))
        if not num_o or not num_i:
            return None
        tags.add('scalar-subquery')
        w = sql(' WHERE {}', where) if where is not None else ''
        scalar = f'(SELECT {self.pick(["max", "min", "avg"])}({self.pick(num_i)[0]}) FROM {{}}{{}})'
        return sql(f'{self.pick(num_o)[0]} {self.pick(["<", ">", "<="])} {scalar}', inner.from_sql, w)

    # ---- select blocks
    def select_block(self, depth, mode=None, order=False):
        """SELECT ... FROM ... [WHERE] [GROUP BY/ROLLUP/CUBE/GROUPING SETS [HAVING]] [ORDER BY LIMIT]."""
        n_rels = self.r.choices([1, 2, 3], weights=[5, 4, 2])[0] if depth > 0 else self.r.choices([1, 2], weights=[3, 1])[0]
        from_sql, rels, est, tags = self.from_clause(depth, n_rels)
        cols = [c for r in rels for c in r.typed(NUMERIC + ('str', 'date'))]
        wcols = {r.ref(w) for r in rels for w in r.wcols}
        where = []
        if self.chance(0.5):
            where.append(self.pred(cols, tags))
            est /= 2
        if self.chance(0.2):
            p = self.semi_predicate(rels, depth, tags)
            if p is not None:
                where.append(p)
        mode = mode or self.r.choices(['plain', 'group', 'global', 'distinct', 'rollup', 'cube', 'sets', 'window'],
                                      weights=[6, 6, 2, 2, 2, 2, 2, 2])[0]
        if mode in ('plain', 'window') and est > MAX_RETURNED:
            mode = 'group'
        items, types, group, having, unique = [], [], None, None, False
        if mode in ('plain', 'window'):
            for _ in range(self.r.randint(1, 4)):
                e, t = self.expr(cols, tags=tags)
                items.append(e)
                types.append(t)
            if mode == 'window' and len(rels) == 1:
                for _ in range(self.r.randint(1, 2)):
                    e, t = self.window_fn(rels[0], tags)
                    items.append(e)
                    types.append(t)
        elif mode == 'distinct':
            keys = self.keys(cols, wcols, tags)
            items, types = [k for k, _ in keys], [t for _, t in keys]
            unique = True
            tags.add('distinct')
        elif mode == 'global':
            for _ in range(self.r.randint(1, 3)):
                e, t = self.agg(cols, tags)
                items.append(e)
                types.append(t)
            tags.add('aggregate')
            est = 1
        else:
            keys = self.keys(cols, wcols, tags)
            items, types = [k for k, _ in keys], [t for _, t in keys]
            key_sql = join_sql(', ', items)
            if mode == 'group':
                group, unique = key_sql, True
                tags.add('aggregate')
            elif mode == 'rollup':
                group = sql('ROLLUP ({})', key_sql)
                tags.add('rollup')
            elif mode == 'cube':
                group = sql('CUBE ({})', key_sql)
                tags.add('cube')
            else:
                sets = [items] + [self.r.sample(items, k=self.r.randint(0, len(items))) for _ in range(self.r.randint(1, 3))]
                group = sql('GROUPING SETS ({})', join_sql(', ', [sql('({})', join_sql(', ', s)) for s in sets]))
                tags.add('grouping-sets')
            if mode in ('rollup', 'cube', 'sets') and self.chance(0.3):
                items.append(sql('grouping({})', items[0]))
                types.append('int')
            for _ in range(self.r.randint(0 if mode != 'group' else 1, 3)):
                e, t = self.agg(cols, tags)
                items.append(e)
                types.append(t)
            if self.chance(0.3):
                tags.add('having')
                having = self.having(cols, tags)
            groups = 1
            for e in items[:len(keys)]:
                groups *= NDV.get(next((c[2] for c in cols if c[0] in e.bs), None), 50)
            est = min(est, groups)
        distinct = 'DISTINCT ' if mode == 'distinct' else ''
        named = [sql(f'{{}} AS c{i}', e) for i, e in enumerate(items)]
        text = sql(f'SELECT {distinct}{{}} FROM {{}}', join_sql(', ', named), from_sql)
        if where:
            text = sql('{} WHERE {}', text, join_sql(' AND ', where))
        if group is not None:
            text = sql('{} GROUP BY {}', text, group)
        if having is not None:
            text = sql('{} HAVING {}', text, having)
        if unique:
            tags.add('unique-rows')
        origins = [next((c[2] for c in cols if c[0] in e.bs), None) if not e.bs.startswith(AGGREGATES) else
                   'count' if e.bs.startswith('count') else None for e in items]
        q = Query(text, types, False, tags, est, origins)
        return self.order_limit(q) if order else q

    def keys(self, cols, wcols, tags):
        """1-3 grouping keys, preferring window results where there are any: [(Sql, type)]."""
        keys = []
        for _ in range(self.r.randint(1, 3)):
            wk = [c for c in cols if c[0] in wcols]
            if wk and self.chance(0.7):
                tags.add('window-key')
                c = self.pick(wk)
                keys.append((Sql(c[0]), c[1]))
                continue
            low = [c for c in cols if c[2] in ('k', 'p', 's', 'd', 'j') or c[0] in wcols] or cols
            e, t = self.expr(low, tags=tags)
            keys.append((e, t))
        seen, out = set(), []
        for e, t in keys:
            if e.bs not in seen:
                seen.add(e.bs)
                out.append((e, t))
        return out

    def having(self, cols, tags):
        e, t = self.agg(cols, tags)
        if t in NUMERIC:
            return sql(f'{{}} {self.pick([">", ">=", "<"])} {{}}', e, self.pick(['1', '2', '0', '100']))
        return sql('{} IS NOT NULL', e)

    def order_limit(self, q):
        """ORDER BY every output column (so ties are equal rows), maybe LIMIT/OFFSET."""
        keys = [f'{i + 1} {self.pick(["ASC", "DESC"])} NULLS {self.pick(["FIRST", "LAST"])}' for i in range(len(q.types))]
        text = sql(f'{{}} ORDER BY {", ".join(keys)}', q.text)
        tags = set(q.tags) | {'order-by'}
        if self.chance(0.7):
            text = sql(f'{{}} LIMIT {self.r.choice([1, 3, 10, 50])}', text)
            if self.chance(0.3):
                text = sql(f'{{}} OFFSET {self.r.choice([1, 5])}', text)
            tags.add('limit')
        return Query(text, q.types, True, tags, q.est, q.origins)

    # ---- whole queries
    def set_operation(self, depth):
        """Two or three SELECTs of the same column types combined by set operators."""
        first = self.select_block(depth, mode=self.pick(['plain', 'group', 'distinct']))
        tags = set(first.tags)
        text = first.text
        for _ in range(self.r.randint(1, 2)):
            other = self.matching_block(first.types, tags)
            op = self.pick(['UNION ALL', 'UNION ALL', 'UNION', 'EXCEPT', 'INTERSECT'])
            tags.add({'UNION ALL': 'union-all', 'UNION': 'union', 'EXCEPT': 'except', 'INTERSECT': 'intersect'}[op])
            text = sql(f'{{}} {op} {{}}', text, other)
            if self.chance(0.3):
                a = self.alias('u')
                text = sql(f'SELECT * FROM ({{}}) AS {a}', text)
        return Query(text, first.types, False, tags - {'unique-rows'}, first.est * 2)

    def matching_block(self, types, tags):
        """A SELECT whose columns have `types`, over a filtered table."""
        rel = self.leaf()
        tags |= rel.tags
        cols = rel.typed(NUMERIC + ('str', 'date'))
        items = []
        for t in types:
            e = self.expr(cols, t, tags)
            items.append(e[0] if e else sql('CAST(NULL AS {})', cast_name(t)))
        text = sql('SELECT {} FROM {}', join_sql(', ', items), rel.from_sql)
        if self.chance(0.6):
            text = sql('{} WHERE {}', text, self.pred(cols, tags))
        return text

    def cte_query(self, depth):
        """WITH c AS (...) and a query that reads c twice."""
        name = f'c{self.n + 1}'
        self.n += 1
        body = self.select_block(max(0, depth - 1), mode=self.pick(['plain', 'group', 'group']))
        if body.est > 5000:
            body = self.select_block(0, mode='group')
        cols = [(f'c{i}', t) for i, t in enumerate(body.types)]
        ukey = [n for n, _ in cols] if 'unique-rows' in body.tags else None
        self.ctes = [(name, cols, ukey, body.est)]
        a, b = self.alias(), self.alias()
        ra = Rel(Sql(f'{name} AS {a}'), a, cols, ukey, body.est)
        rb = Rel(Sql(f'{name} AS {b}'), b, cols, ukey, body.est)
        tags = set(body.tags) - {'unique-rows'} | {'cte'}
        key = cols[0][0]
        roll = self.r.random()
        other_cols = [c for c in ra.typed(NUMERIC + ('str', 'date'))]
        if roll < 0.4:
            aggs = [self.agg(other_cols + rb.typed(NUMERIC), tags) for _ in range(2)]
            main = sql(f'SELECT {ra.ref(key)}, {{}} FROM {{}} JOIN {{}} ON {ra.ref(key)} = {rb.ref(key)} GROUP BY {ra.ref(key)}',
                       join_sql(', ', [e for e, _ in aggs]), ra.from_sql, rb.from_sql)
            types = [cols[0][1]] + [t for _, t in aggs]
        elif roll < 0.7:
            items = [Sql(c[0]) for c in other_cols]
            test = f'{ra.ref(key)} {self.pick(["IN", "NOT IN"])} (SELECT {rb.ref(key)} FROM {{}} WHERE {{}})'
            main = sql(f'SELECT {{}} FROM {{}} WHERE {test}',
                       join_sql(', ', items), ra.from_sql, rb.from_sql, self.pred(rb.typed(NUMERIC + ('str', 'date')), tags))
            types = [c[1] for c in other_cols]
        else:
            items_a = join_sql(', ', [Sql(c[0]) for c in other_cols])
            items_b = join_sql(', ', [Sql(rb.ref(n)) for n, _ in cols])
            main = sql('SELECT {} FROM {} UNION ALL SELECT {} FROM {} WHERE {}',
                       items_a, ra.from_sql, items_b, rb.from_sql, self.pred(rb.typed(NUMERIC + ('str', 'date')), tags))
            types = [c[1] for c in other_cols]
            tags.add('union-all')
        self.ctes = []
        return Query(sql(f'WITH {name} AS ({{}}) {{}}', body.text, main), types, False, tags, body.est * 2)

    def query(self):
        """One random query."""
        self.n = 0
        self.ctes = []
        shape = self.r.choices(['block', 'setop', 'cte', 'window-key', 'cast-filter'], weights=[28, 4, 4, 4, 1])[0]
        if shape == 'cast-filter':
            q = self.cast_filter_query()
        elif shape == 'setop':
            q = self.set_operation(1)
        elif shape == 'cte':
            q = self.cte_query(1)
        elif shape == 'window-key':
            q = self.window_key_query()
        else:
            q = self.select_block(self.r.choice([0, 1, 1, 2]))
        if self.chance(0.2):
            q = self.order_limit(q)
        return q

    def cast_filter_query(self):
        """`WHERE CAST(x AS t) IS [NOT] NULL`, alone over a table: both engines read every row, so
        where some value does not convert both must refuse the query."""
        rel = self.table()
        tags = set(rel.tags) | {'cast-filter'}
        col, target = self.pick([('s', 'INT'), ('s', 'BIGINT'), ('s', 'DOUBLE'), ('j', 'INT'), ('v', 'DECIMAL(3,1)'),
                                 ('k', 'DECIMAL(3,1)'), ('k', 'BIGINT'), ('k', 'DOUBLE'), ('j', 'DOUBLE'), ('v', 'DECIMAL(10,2)')])
        test = self.pick(['IS NOT NULL', 'IS NOT NULL', 'IS NULL'])
        cast = f'CAST({rel.ref(col)} AS {target})'
        if self.chance(0.5):
            text = sql(f'SELECT count(*), count(DISTINCT {rel.ref("k")}), sum({rel.ref("v")}) FROM {{}} WHERE {cast} {test}', rel.from_sql)
            q = Query(text, ['bigint', 'bigint', 'double'], False, tags, 1)
        else:
            text = sql(f'SELECT {rel.ref("id")}, {rel.ref(col)} FROM {{}} WHERE {cast} {test}', rel.from_sql)
            q = Query(text, ['bigint', dict(rel.cols)[col]], False, tags, rel.est)
        # DuckDB may answer such a query without casting every row (it reads `CAST(x) IS NULL`
        # as `x IS NULL`); whether some value fails to convert is asked of it directly.
        q.unconvertible = sql(
            f'SELECT count(*) FROM {{}} WHERE {rel.ref(col)} IS NOT NULL AND TRY_CAST({rel.ref(col)} AS {target}) IS NULL',
            rel.from_sql)
        return q

    def window_key_query(self):
        """A window result (rank, row_number, ...) used as a GROUP BY or join key."""
        w = self.window_rel(self.rel(0), coarse=True)
        tags = set(w.tags) | {'window-key'}
        wk = self.pick(sorted(w.wcols))
        wt = dict(w.cols)[wk]
        roll = self.r.random()
        if roll < 0.5:
            aggs = [self.agg(w.typed(NUMERIC + ('str', 'date')), tags) for _ in range(self.r.randint(1, 2))]
            text = sql(f'SELECT {w.ref(wk)}, {{}} FROM {{}} GROUP BY {w.ref(wk)}', join_sql(', ', [e for e, _ in aggs]), w.from_sql)
            return Query(text, [wt] + [t for _, t in aggs], False, tags, 200)
        other = self.rel(0)
        tags |= other.tags
        oc = self.pick([n for n, t in other.cols if t in ('int', 'bigint') and other.origin.get(n) in ('k', 'j', 'id')] or
                       [n for n, t in other.cols if t in ('int', 'bigint')])
        kind = self.pick(['JOIN', 'LEFT JOIN', 'RIGHT JOIN', 'FULL OUTER JOIN'])
        text = sql(f'SELECT {w.ref(wk)}, {other.ref(oc)}, count(*) FROM {{}} {kind} {{}} ON {w.ref(wk)} = {other.ref(oc)} '
                   f'GROUP BY {w.ref(wk)}, {other.ref(oc)}', w.from_sql, other.from_sql)
        return Query(text, [wt, dict(other.cols)[oc], 'bigint'], False, tags, 400)


def cast_name(t):
    return {'int': Sql('INT'), 'bigint': Sql('BIGINT'), 'double': Sql('DOUBLE'), 'decimal': Sql('DECIMAL(20,2)'),
            'str': Sql('STRING', 'VARCHAR'), 'date': Sql('DATE')}[t]


def typed_literal(r, t):
    """A literal with an explicit type, for VALUES rows (NULL sometimes)."""
    if r.random() < 0.15:
        return sql('CAST(NULL AS {})', cast_name(t))
    return sql('CAST({} AS {})', literal(r, t), cast_name(t))


def sort_key(text):
    """Orders literals of one type as the engines would (numbers, quoted strings, DATE '...')."""
    try:
        return (0, float(text), '')
    except ValueError:
        return (1, 0.0, text)
