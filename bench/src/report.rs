//! Markdown tables and the target checklist.

/// A markdown table being built.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles (a title ending in `>` is right-aligned).
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| (*s).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True before the first row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as markdown.
    pub fn render(&self) -> String {
        let titles: Vec<&str> = self
            .header
            .iter()
            .map(|h| h.trim_end_matches('>'))
            .collect();
        let align: Vec<&str> = self
            .header
            .iter()
            .map(|h| if h.ends_with('>') { "---:" } else { "---" })
            .collect();
        let mut out = format!("| {} |\n|{}|\n", titles.join(" | "), align.join("|"));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}

/// A number with `digits` decimals, or `-`.
pub fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

/// A ratio `a / b` as `1.23×`, or `-`.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "-".into(),
    }
}

/// One target of the issue and what this run measured.
pub struct Target {
    /// What is compared.
    pub what: String,
    /// The ratio asked for.
    pub wanted: f64,
    /// The ratio measured (`None`: peer not run).
    pub measured: Option<f64>,
}

/// The checklist table.
pub fn targets(targets: &[Target]) -> String {
    let mut t = Table::new(&["target", "wanted>", "measured>", "met"]);
    for x in targets {
        t.row(vec![
            x.what.clone(),
            format!("≥ {:.2}×", x.wanted),
            x.measured.map_or("-".into(), |m| format!("{m:.2}×")),
            match x.measured {
                Some(m) if m >= x.wanted => "yes".into(),
                Some(_) => "**no**".into(),
                None => "not run".into(),
            },
        ]);
    }
    t.render()
}
