//! Validation: a parsed scenario file becomes a [`Scenario`], or an error that names the file and
//! the field (limits in `limits.rs`, fault kinds in `faults/`).

use super::*;

impl ScenarioFile {
    pub(super) fn validate(self, path: &str) -> Result<Scenario, String> {
        if self.name.trim().is_empty() {
            return Err("name: must not be empty".into());
        }
        if self.duration_ms == 0 {
            return Err("duration_ms: must be greater than 0".into());
        }

        let t = &self.topology;
        if t.masters == 0 {
            return Err("topology.masters: must be at least 1".into());
        }
        if t.masters > 64 {
            return Err("topology.masters: at most 64".into());
        }
        if let Some(n) = t.redlock_masters
            && !(1..=64).contains(&n)
        {
            return Err(format!(
                "topology.redlock_masters: must be from 1 to 64, got {n}"
            ));
        }
        if !["off", "no", "everysec", "always"].contains(&t.appendfsync.as_str()) {
            return Err(format!(
                "topology.appendfsync: \"{}\" is not one of off, no, everysec, always",
                t.appendfsync
            ));
        }
        if t.replicas > 16 {
            return Err("topology.replicas: at most 16 per master".into());
        }
        if t.sentinels > 15 {
            return Err("topology.sentinels: at most 15".into());
        }
        if t.sentinel_down_after_ms == 0 {
            return Err("topology.sentinel_down_after_ms: must be greater than 0".into());
        }
        if t.sentinel_failover_timeout_ms == 0 {
            return Err("topology.sentinel_failover_timeout_ms: must be greater than 0".into());
        }
        if t.min_replicas_max_lag_ms == 0 || !t.min_replicas_max_lag_ms.is_multiple_of(1000) {
            return Err(format!(
                "topology.min_replicas_max_lag_ms: Redis takes min-replicas-max-lag in whole seconds: give a positive multiple of 1000, got {}",
                t.min_replicas_max_lag_ms
            ));
        }
        if !(1..=limits::MAX_LUA_WORK).contains(&t.lua_time_limit_work) {
            return Err(format!(
                "topology.lua_time_limit_work: must be from 1 to {} (ten times the default), got {}",
                limits::MAX_LUA_WORK,
                t.lua_time_limit_work
            ));
        }
        if !(1..=limits::MAX_LUA_MEMORY_MB).contains(&t.lua_memory_limit_mb) {
            return Err(format!(
                "topology.lua_memory_limit_mb: must be from 1 to {}, got {}",
                limits::MAX_LUA_MEMORY_MB,
                t.lua_memory_limit_mb
            ));
        }
        if !["absolute", "relative"].contains(&t.ttl_propagation.as_str()) {
            return Err(format!(
                "topology.ttl_propagation: \"{}\" is not one of absolute (Redis 7.0), relative (Redis 6.2)",
                t.ttl_propagation
            ));
        }
        if t.min_replicas_to_write > t.replicas {
            return Err(format!(
                "topology.min_replicas_to_write: {} is more than the {} replicas per master: no write could ever succeed",
                t.min_replicas_to_write, t.replicas
            ));
        }
        let c = &self.clients;
        if c.count == 0 {
            return Err("clients.count: must be at least 1".into());
        }
        if c.count > 1000 {
            return Err("clients.count: at most 1000".into());
        }
        if c.command_timeout_ms == 0 {
            return Err("clients.command_timeout_ms: must be greater than 0".into());
        }
        if c.threads == 0 || c.threads > 64 {
            return Err(format!(
                "clients.threads: must be from 1 to 64, got {}",
                c.threads
            ));
        }
        if c.count * c.threads > limits::MAX_LOCK_OWNERS {
            return Err(format!(
                "clients.threads: {} clients × {} threads is {} lock owners (limit {})",
                c.count,
                c.threads,
                c.count * c.threads,
                limits::MAX_LOCK_OWNERS
            ));
        }
        if c.acquisitions > limits::MAX_ACQUISITIONS {
            return Err(format!(
                "clients.acquisitions: {} per worker (limit {}; the run also ends at duration_ms)",
                c.acquisitions,
                limits::MAX_ACQUISITIONS
            ));
        }
        if self.faults.len() > limits::MAX_FAULTS {
            return Err(format!(
                "faults: {} scripted faults (limit {}; a random nemesis draws many more)",
                self.faults.len(),
                limits::MAX_FAULTS
            ));
        }
        if let Some(Value::Array(list)) = &self.schemes
            && list.len() > limits::MAX_SCHEMES
        {
            return Err(format!(
                "schemes: {} schemes, each a run of its own (limit {})",
                list.len(),
                limits::MAX_SCHEMES
            ));
        }
        if self.lease_ms == Some(0) {
            return Err("lease_ms: must be greater than 0".into());
        }
        let (schemes, all_schemes) = self.scheme_rows()?;
        if let Some(extend) = c.extend {
            match (extend.every_ms, extend.before_write) {
                (Some(every_ms), _) if every_ms < limits::MIN_EXTEND_EVERY_MS => {
                    return Err(format!(
                        "clients.extend.every_ms: an extension every {every_ms} ms is too frequent (limit: at least {} ms)",
                        limits::MIN_EXTEND_EVERY_MS
                    ));
                }
                (Some(_), true) | (None, false) => {
                    return Err(
                        "clients.extend: give exactly one of every_ms (extend every N ms of the hold) and before_write: true"
                            .into(),
                    );
                }
                _ => {}
            }
            for (i, spec) in schemes.iter().enumerate() {
                let field = if self.schemes.is_some() {
                    format!("schemes[{i}]")
                } else {
                    "scheme".to_string()
                };
                if !spec.build(&field)?.can_extend() {
                    return Err(format!(
                        "clients.extend: {field} ({}) has no extend operation (schemes with one: redlock presets leandromoreira/redlock-rb and redsync, set-nx-px-lua presets redis-py with ttl_ms and redbeat@*)",
                        spec.label()
                    ));
                }
            }
        }
        if let Some(incident) = &self.incident {
            incident.validate()?;
        }
        let labels: Vec<String> = schemes.iter().map(SchemeSpec::label).collect();
        for (field, rows) in [
            ("expect_by_scheme", keys(&self.expect_by_scheme)),
            ("expect_some_by_scheme", keys(&self.expect_some_by_scheme)),
            ("unasserted_by_scheme", keys(&self.unasserted_by_scheme)),
        ] {
            if let Some(unknown) = rows.into_iter().find(|l| !labels.contains(l)) {
                return Err(format!(
                    "{field}.{unknown}: no scheme row \"{unknown}\" in this scenario (its rows: {})",
                    labels.join(", ")
                ));
            }
        }
        self.validate_unasserted()?;
        let mut variants = BTreeMap::new();
        for masters in schemes
            .iter()
            .map(|s| masters_for(&self.topology, s))
            .chain([self.topology.masters])
        {
            if variants.contains_key(&masters) {
                continue;
            }
            let topology = Topology {
                masters,
                ..self.topology.clone()
            };
            let row = RowNodes {
                nodes: node_names(&topology, &self.clients).into_iter().collect(),
                masters: (1..=masters).map(|i| format!("redis-{i}")).collect(),
            };
            let variant = self.variant(&row).map_err(|e| {
                if masters == self.topology.masters {
                    e
                } else {
                    format!("{e} (for the Redlock rows, with {masters} masters)")
                }
            })?;
            variants.insert(masters, variant);
        }
        let Variant { faults, nemesis } = variants[&self.topology.masters].clone();
        let seeds = match &self.seeds {
            Some(text) => SeedRange::parse(text).map_err(|e| format!("seeds: {e}"))?,
            None => DEFAULT_SEEDS,
        };
        if self.liveness_window_ms == Some(0) {
            return Err("liveness_window_ms: must be greater than 0".into());
        }
        let scenario = Scenario {
            path: path.to_string(),
            name: self.name,
            description: self.description,
            source: self.source,
            seed: self.seed,
            seeds,
            duration_ms: self.duration_ms,
            topology: self.topology,
            network: self.network,
            schemes,
            all_schemes,
            lease_ms: self.lease_ms,
            clients: self.clients,
            resource: self.resource,
            faults,
            faults_in_sequence: self.faults_in_sequence,
            nemesis,
            expect: self.expect,
            expect_some: self.expect_some,
            expect_by_scheme: self.expect_by_scheme,
            expect_some_by_scheme: self.expect_some_by_scheme,
            unasserted_by_scheme: self.unasserted_by_scheme,
            liveness_window_ms: self.liveness_window_ms,
            incident: self.incident,
            matrix: self.matrix,
            variants,
        };
        scenario.validate_liveness_phase()?;
        Ok(scenario)
    }
}

fn keys<V>(map: &BTreeMap<String, V>) -> Vec<&String> {
    map.keys().collect()
}

impl ScenarioFile {
    /// Each `unasserted_by_scheme` property gives its reason, and is not also asserted on its
    /// row by `expect_by_scheme` / `expect_some_by_scheme` (which would contradict it).
    fn validate_unasserted(&self) -> Result<(), String> {
        for (label, unasserted) in &self.unasserted_by_scheme {
            let properties = unasserted.properties();
            if properties.is_empty() {
                return Err(format!(
                    "unasserted_by_scheme.{label}: names no property (mutual_exclusion, resource_safety, liveness); remove the row or name one with its reason"
                ));
            }
            for (property, reason) in properties {
                let field = format!("unasserted_by_scheme.{label}.{property}");
                if reason.trim().is_empty() {
                    return Err(format!(
                        "{field}: give the reason it is not asserted (it is empty)"
                    ));
                }
                for (other, by) in [
                    ("expect_by_scheme", &self.expect_by_scheme),
                    ("expect_some_by_scheme", &self.expect_some_by_scheme),
                ] {
                    if by.get(label).is_some_and(|e| e.names(property)) {
                        return Err(format!(
                            "{field}: {other}.{label} asserts {property}; a property is either asserted or not: remove one of the two"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The scheme rows: `scheme`, the `schemes` list, or `"schemes": "all"` (every row of
    /// `locksim schemes` but `script`), each with `lease_ms` applied. Also says whether it was
    /// "all".
    pub(super) fn scheme_rows(&self) -> Result<(Vec<SchemeSpec>, bool), String> {
        let lease = |spec: SchemeSpec, field: &str| match self.lease_ms {
            Some(lease_ms) => spec.with_lease(lease_ms, field),
            None => Ok(spec),
        };
        let one = |v: &Value, field: &str| lease(SchemeSpec::from_json(v, field)?, field);
        match (&self.scheme, &self.schemes) {
            (Some(_), Some(_)) => Err("scheme and schemes: give one of them, not both".into()),
            (None, None) => Err(
                "scheme: missing (a scheme id such as \"set-nx-px-lua\", or `schemes`: a list or \"all\")"
                    .into(),
            ),
            (Some(v), None) => Ok((vec![one(v, "scheme")?], false)),
            (None, Some(Value::String(all))) if all == "all" => {
                let rows = matrix_rows()
                    .iter()
                    .map(|r| one(&r.spec_json(), &format!("schemes (\"all\": {})", r.label())))
                    .collect::<Result<_, _>>()?;
                Ok((rows, true))
            }
            (None, Some(Value::Array(list))) => {
                if list.is_empty() {
                    return Err("schemes: must list at least one scheme".into());
                }
                let rows = list
                    .iter()
                    .enumerate()
                    .map(|(i, v)| one(v, &format!("schemes[{i}]")))
                    .collect::<Result<_, _>>()?;
                Ok((rows, false))
            }
            (None, Some(other)) => Err(format!(
                "schemes: expected a list of schemes or \"all\", got {other}"
            )),
        }
    }

    /// The faults and nemesis validated against one node set.
    pub(super) fn variant(&self, row: &RowNodes) -> Result<Variant, String> {
        let faults = self
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| f.validate(&format!("faults[{i}]"), row))
            .collect::<Result<Vec<_>, _>>()?;
        let node_list: Vec<String> = row.nodes.iter().cloned().collect();
        let mut link_changes = 0;
        for (i, fault) in faults.iter().enumerate() {
            let left = (limits::MAX_LINK_CHANGES - link_changes) / 2;
            link_changes += 2 * fault.kind.count_links(&node_list, left);
            if link_changes > limits::MAX_LINK_CHANGES {
                return Err(format!(
                    "faults[{i}]: the partitions and isolations up to this one cut and heal more than {0} links (limit {0} link changes)",
                    limits::MAX_LINK_CHANGES
                ));
            }
        }
        let nemesis = match &self.nemesis {
            Some(value) => Some(NemesisSpec::from_json(value, &row.nodes, self.duration_ms)?),
            None => None,
        };
        Ok(Variant { faults, nemesis })
    }
}

impl Scenario {
    /// With a random nemesis, the run must go on for more than a liveness window after the
    /// nemesis heals, or a lock-out could never be judged `stuck`.
    pub(super) fn validate_liveness_phase(&self) -> Result<(), String> {
        let Some(nemesis) = &self.nemesis else {
            return Ok(());
        };
        for scheme in &self.schemes {
            let window_ms = self.liveness_window_ms(scheme);
            let heal_at_ms = self.heal_at_ms(scheme);
            let after_ms = self.duration_ms - heal_at_ms.min(self.duration_ms);
            if nemesis.heal_at_ms.is_some() && after_ms <= window_ms {
                return Err(format!(
                    "nemesis.heal_at_ms: healing at {heal_at_ms} ms leaves {after_ms} ms of the {} ms run, not more than the liveness window ({window_ms} ms for {}): a lock-out after healing could never be seen; heal earlier, lengthen duration_ms or shorten liveness_window_ms",
                    self.duration_ms,
                    scheme.label()
                ));
            }
            if heal_at_ms == 0 {
                return Err(format!(
                    "duration_ms: {} ms leaves no time for random faults: the nemesis heals two liveness windows ({window_ms} ms each for {}) before the end; lengthen duration_ms, or set nemesis.heal_at_ms or liveness_window_ms",
                    self.duration_ms,
                    scheme.label()
                ));
            }
        }
        Ok(())
    }
}
