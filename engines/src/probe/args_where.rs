//! `probe`'s flags for where the I/Os go (fio's spellings), flattened into
//! [`super::args::ProbeArgs`], and their resolution into a
//! [`collectors::probe::place::Placement`] (decision 0091). Values are checked here, so a
//! bad one is one line naming the option, exit 2; a job file's line is added by
//! `jobfile::place_error`.

use clap::Args;
use collectors::probe::place::{Amount, BsChoice, Dist, Placement, Zone};
use collectors::probe::Rw;

use super::output::fmt_size as sz;
use format::cli::parse_size;
use format::usage;

/// `--size`: bytes, or a share of an existing file's or device's size (fio's `size=50%`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeArg {
    Bytes(u64),
    Pct(f64),
}

impl SizeArg {
    pub fn bytes(self) -> Option<u64> {
        match self {
            SizeArg::Bytes(b) => Some(b),
            SizeArg::Pct(_) => None,
        }
    }
}

fn parse_pct(s: &str) -> Option<f64> {
    let v: f64 = s.trim().strip_suffix('%')?.trim().parse().ok()?;
    (v > 0.0 && v <= 100.0).then_some(v)
}

/// clap's parser for `--size`.
pub(crate) fn parse_size_arg(s: &str) -> Result<SizeArg, String> {
    if s.trim().ends_with('%') {
        return parse_pct(s)
            .map(SizeArg::Pct)
            .ok_or_else(|| format!("takes a size like 256MiB or a share like 50%; got '{s}'"));
    }
    parse_size(s).map(SizeArg::Bytes)
}

fn amount(flag: &str, s: &str) -> anyhow::Result<Amount> {
    if s.trim().ends_with('%') {
        let v: f64 = s.trim().trim_end_matches('%').parse().unwrap_or(-1.0);
        if !(0.0..=100.0).contains(&v) {
            return Err(usage!(
                "--{flag} takes bytes (64k) or a share of the target (10%); got '{s}'"
            ));
        }
        return Ok(Amount::Pct(v));
    }
    parse_size(s)
        .map(Amount::Bytes)
        .map_err(|e| usage!("--{flag} {e}"))
}

fn bytes(flag: &str, s: &str) -> anyhow::Result<u64> {
    parse_size(s).map_err(|e| usage!("--{flag} {e}"))
}

/// Where the I/Os go (fio's options; the job file takes them by these names).
#[derive(Args, Debug, Default, Clone)]
pub struct WhereArgs {
    /// fio's norandommap: random offsets may repeat before every block was touched
    /// (default: each block once per pass, fio's random map).
    #[arg(long)]
    pub norandommap: bool,
    /// fio's randrepeat: 1 (default) the same offsets each run; 0 a new seed each run
    /// (unless --seed).
    #[arg(long, value_name = "0|1")]
    pub randrepeat: Option<String>,
    /// fio's random_generator: tausworthe, tausworthe64 or lfsr are accepted; diskpulse's
    /// own generator with the random map gives what each promises (every block once).
    #[arg(long, alias = "random_generator", value_name = "NAME")]
    pub random_generator: Option<String>,
    /// With rw=randread:N: sequential (default: the I/Os between random ones go on from
    /// it) or identical (they repeat its offset).
    #[arg(long, alias = "rw_sequencer", value_name = "MODE")]
    pub rw_sequencer: Option<String>,
    /// fio's bssplit: weighted block sizes, SIZE/PCT:SIZE/PCT..., a ',' between the read
    /// and the write list (4k/10:64k/50:32k/40).
    #[arg(long, value_name = "SPLIT")]
    pub bssplit: Option<String>,
    /// fio's bsrange: block sizes uniform in MIN-MAX (multiples of MIN), READ,WRITE.
    #[arg(long, alias = "blocksize_range", value_name = "MIN-MAX[,MIN-MAX]")]
    pub bsrange: Option<String>,
    /// fio's blockalign (ba): random offsets are multiples of it (default: the minimum
    /// block size), READ,WRITE.
    #[arg(long, alias = "ba", value_name = "SIZE[,SIZE]")]
    pub blockalign: Option<String>,
    /// fio's bs_unaligned: bsrange sizes need not be multiples of the minimum.
    #[arg(long, alias = "bs_unaligned")]
    pub bs_unaligned: bool,
    /// fio's random_distribution: random (default), zipf:THETA, pareto:H, normal:DEV,
    /// zoned:PCT/PCT:..., zoned_abs:PCT/SIZE:... (a ':CENTER' 0..1 after zipf/pareto/normal).
    #[arg(long, alias = "random_distribution", value_name = "DIST")]
    pub random_distribution: Option<String>,
    /// fio's zonemode: none or strided (zbd is refused: no zoned block devices here).
    #[arg(long, value_name = "MODE")]
    pub zonemode: Option<String>,
    /// Bytes done in one zone before the next (zonesize alone means zonemode=strided).
    #[arg(long, value_name = "SIZE")]
    pub zonesize: Option<String>,
    /// Width of a zone (default zonesize).
    #[arg(long, value_name = "SIZE")]
    pub zonerange: Option<String>,
    /// Bytes skipped after each zone.
    #[arg(long, value_name = "SIZE")]
    pub zoneskip: Option<String>,
    /// Where the job's region starts: bytes or a share of the target (10%).
    #[arg(long, value_name = "SIZE|PCT")]
    pub offset: Option<String>,
    /// Added to --offset for each --numjobs copy (job N starts N increments further).
    #[arg(long, alias = "offset_increment", value_name = "SIZE|PCT")]
    pub offset_increment: Option<String>,
    /// Bytes of I/O per pass (default --size; more than --size wraps). fio: io_limit too.
    #[arg(
        long,
        alias = "io_size",
        alias = "io_limit",
        alias = "io-limit",
        value_name = "SIZE"
    )]
    pub io_size: Option<String>,
    /// I/Os per pass (ends a pass before --size bytes when reached; also with --time-based).
    #[arg(long, alias = "number_ios", value_name = "N")]
    pub number_ios: Option<u64>,
    /// Passes over the region (fio's loops; ignored with --time-based). Default 1.
    #[arg(long, value_name = "N")]
    pub loops: Option<u32>,
    /// fio's directory: where the job's file is (a relative --filename is taken in it;
    /// without --filename the file is named by --filename_format).
    #[arg(long, value_name = "DIR")]
    pub directory: Option<std::path::PathBuf>,
    /// fio's filename_format for a file named by --directory: $jobname, $jobnum and
    /// $filenum are replaced (default $jobname.$jobnum.$filenum, as fio).
    #[arg(long, alias = "filename_format", value_name = "FORMAT")]
    pub filename_format: Option<String>,
    /// fio's nrfiles: files per job (default 1), named by --filename_format in --directory.
    #[arg(long, value_name = "N")]
    pub nrfiles: Option<u32>,
    /// fio's filesize: each file's size, or LOW-HIGH (drawn per file); default --size shared out.
    #[arg(long, value_name = "SIZE")]
    pub filesize: Option<String>,
    /// fio's file_service_type: roundrobin (default: the next file after each I/O), random, sequential.
    #[arg(long, alias = "file_service_type", value_name = "TYPE")]
    pub file_service_type: Option<String>,
}

/// fio's `filesize` for one file: a size (a range `LO-HI` is drawn per file by
/// `args_files`: None here).
pub(crate) fn filesize(w: &WhereArgs) -> anyhow::Result<Option<SizeArg>> {
    let Some(s) = &w.filesize else {
        return Ok(None);
    };
    if s.contains('-') {
        return Ok(None);
    }
    Ok(Some(SizeArg::Bytes(bytes("filesize", s)?)))
}

impl WhereArgs {
    /// The command line's options over the file's (`jobfile::overlay`).
    pub(crate) fn over(self, file: WhereArgs) -> WhereArgs {
        WhereArgs {
            norandommap: self.norandommap || file.norandommap,
            randrepeat: self.randrepeat.or(file.randrepeat),
            random_generator: self.random_generator.or(file.random_generator),
            rw_sequencer: self.rw_sequencer.or(file.rw_sequencer),
            bssplit: self.bssplit.or(file.bssplit),
            bsrange: self.bsrange.or(file.bsrange),
            blockalign: self.blockalign.or(file.blockalign),
            bs_unaligned: self.bs_unaligned || file.bs_unaligned,
            random_distribution: self.random_distribution.or(file.random_distribution),
            zonemode: self.zonemode.or(file.zonemode),
            zonesize: self.zonesize.or(file.zonesize),
            zonerange: self.zonerange.or(file.zonerange),
            zoneskip: self.zoneskip.or(file.zoneskip),
            offset: self.offset.or(file.offset),
            offset_increment: self.offset_increment.or(file.offset_increment),
            io_size: self.io_size.or(file.io_size),
            number_ios: self.number_ios.or(file.number_ios),
            loops: self.loops.or(file.loops),
            directory: self.directory.or(file.directory),
            filename_format: self.filename_format.or(file.filename_format),
            nrfiles: self.nrfiles.or(file.nrfiles),
            filesize: self.filesize.or(file.filesize),
            file_service_type: self.file_service_type.or(file.file_service_type),
        }
    }
}

/// What [`resolve`] gives besides the placement.
pub(crate) struct Placed {
    pub place: Placement,
    /// The largest block size per direction (buffers, the size checks).
    pub bs: [u64; 2],
    /// randrepeat=0 without --seed: a seed of this run's own.
    pub seed: Option<u64>,
    /// What a user should know about how fio reads these options (printed as `note:`).
    pub notes: Vec<String>,
}

/// `rw=MODE[:N]`: the mode and what follows its ':'.
pub(crate) fn split_rw(s: &str) -> (&str, Option<&str>) {
    match s.split_once(':') {
        Some((m, n)) => (m, Some(n)),
        None => (s, None),
    }
}

/// Two values `A,B` (one: both).
fn per_dir(s: &str) -> [&str; 2] {
    match s.split_once(',') {
        Some((r, w)) if !w.is_empty() => [r, w],
        Some((r, _)) => [r, r],
        None => [s, s],
    }
}

fn parse_bssplit(s: &str) -> anyhow::Result<[Vec<(u64, f64)>; 2]> {
    let bad = |why: &str| {
        usage!("--bssplit takes SIZE/PCT entries joined by ':' (4k/10:64k/50:32k/40), a ',' between reads and writes; {why} in '{s}'")
    };
    let one = |part: &str| -> anyhow::Result<Vec<(u64, f64)>> {
        let mut v = vec![];
        let mut missing = 0;
        let mut sum = 0.0;
        for e in part.split(':').filter(|e| !e.is_empty()) {
            let (b, p) = match e.split_once('/') {
                Some((b, p)) if !p.is_empty() => {
                    let p: f64 = p
                        .parse()
                        .map_err(|_| bad(&format!("'{p}' is not a percentage")))?;
                    (b, p)
                }
                Some((b, _)) => (b, -1.0),
                None => (e, -1.0),
            };
            let b = parse_size(b).map_err(|_| bad(&format!("'{b}' is not a size")))?;
            if b == 0 {
                return Err(bad("a size of 0"));
            }
            if p < 0.0 {
                missing += 1;
            } else {
                sum += p;
            }
            v.push((b, p));
        }
        if v.is_empty() {
            return Err(bad("no entry"));
        }
        if sum > 100.0 + 1e-9 {
            return Err(bad(&format!(
                "the percentages add up to {sum}, more than 100"
            )));
        }
        for e in v.iter_mut().filter(|e| e.1 < 0.0) {
            e.1 = (100.0 - sum) / missing as f64;
        }
        // As fio: sorted by share, so a total under 100 leaves the rest to the largest.
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(v)
    };
    let [r, w] = per_dir(s);
    Ok([one(r)?, one(w)?])
}

fn parse_bsrange(s: &str) -> anyhow::Result<[(u64, u64); 2]> {
    let bad = || {
        usage!("--bsrange takes MIN-MAX sizes like 1k-4k (or 1k-4k,8k-16k for reads,writes); got '{s}'")
    };
    let one = |p: &str| -> anyhow::Result<(u64, u64)> {
        let (a, b) = p.split_once('-').ok_or_else(bad)?;
        let (a, b) = (
            parse_size(a).map_err(|_| bad())?,
            parse_size(b).map_err(|_| bad())?,
        );
        if a == 0 || a > b {
            return Err(bad());
        }
        Ok((a, b))
    };
    let [r, w] = per_dir(s);
    Ok([one(r)?, one(w)?])
}

/// `zoned:60/10:30/20` or `zoned_abs:60/20k:40/1g`, per direction with ','.
fn parse_zoned(s: &str, abs: bool) -> anyhow::Result<[Vec<(f64, f64)>; 2]> {
    let name = if abs { "zoned_abs" } else { "zoned" };
    let bad = |why: String| {
        usage!("--random_distribution {name}: takes ACCESS%/{}: entries joined by ':' (the access shares adding up to 100); {why}", if abs { "SIZE" } else { "REGION%" })
    };
    let one = |part: &str| -> anyhow::Result<Vec<(f64, f64)>> {
        let mut v = vec![];
        let (mut acc, mut reg) = (0.0, 0.0);
        for e in part.split(':').filter(|e| !e.is_empty()) {
            let (a, b) = e.split_once('/').ok_or_else(|| bad(format!("got '{e}'")))?;
            let a: f64 = a
                .parse()
                .map_err(|_| bad(format!("'{a}' is not a percentage")))?;
            // fio: a region share left out is the rest of the region (zoned:50/5:30/15:20/).
            if b.is_empty() && !abs {
                acc += a;
                v.push((a, f64::NAN));
                continue;
            }
            let b = if abs {
                parse_size(b).map_err(|_| bad(format!("'{b}' is not a size")))? as f64
            } else {
                b.parse()
                    .map_err(|_| bad(format!("'{b}' is not a percentage")))?
            };
            acc += a;
            reg += b;
            v.push((a, b));
        }
        if (acc - 100.0).abs() > 1e-6 {
            return Err(bad(format!("the access shares add up to {acc}")));
        }
        if !abs && reg > 100.0 + 1e-6 {
            return Err(bad(format!(
                "the region shares add up to {reg}, more than 100"
            )));
        }
        let missing = v.iter().filter(|e| e.1.is_nan()).count();
        for e in v.iter_mut().filter(|e| e.1.is_nan()) {
            e.1 = (100.0 - reg) / missing as f64;
        }
        Ok(v)
    };
    let [r, w] = per_dir(s);
    Ok([one(r)?, one(w)?])
}

fn parse_dist(s: &str) -> anyhow::Result<Dist> {
    let bad = || {
        usage!("--random_distribution takes random, zipf:THETA, pareto:H, normal:DEV, zoned:... or zoned_abs:... (fio's); got '{s}'")
    };
    let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
    let nums = |rest: &str| -> anyhow::Result<(f64, Option<f64>)> {
        let mut it = rest.split(':');
        let v: f64 = it.next().unwrap_or("").parse().map_err(|_| bad())?;
        let c = match it.next() {
            Some(c) => {
                let c: f64 = c.parse().map_err(|_| bad())?;
                if !(0.0..=1.0).contains(&c) {
                    return Err(usage!("--random_distribution {s}: the center takes 0 to 1"));
                }
                Some(c)
            }
            None => None,
        };
        Ok((v, c))
    };
    Ok(match kind {
        "random" => Dist::Random,
        "zipf" => {
            let (theta, center) = nums(rest)?;
            if theta <= 0.0 || theta == 1.0 {
                return Err(usage!("--random_distribution {s}: zipf's theta must be above 0 and not 1 (fio's rule), like zipf:1.2"));
            }
            Dist::Zipf { theta, center }
        }
        "pareto" => {
            let (h, center) = nums(rest)?;
            if !(h > 0.0 && h < 1.0) {
                return Err(usage!(
                    "--random_distribution {s}: pareto's h is between 0 and 1, like pareto:0.9"
                ));
            }
            Dist::Pareto { h, center }
        }
        "normal" | "gauss" => {
            let (dev_pct, center) = nums(rest)?;
            if !(0.0..=100.0).contains(&dev_pct) {
                return Err(bad());
            }
            Dist::Normal { dev_pct, center }
        }
        "zoned" => {
            let [r, w] = parse_zoned(rest, false)?;
            Dist::Zoned([r, w])
        }
        "zoned_abs" => {
            let [r, w] = parse_zoned(rest, true)?;
            let b = |v: Vec<(f64, f64)>| v.into_iter().map(|(a, b)| (a, b as u64)).collect();
            Dist::ZonedAbs([b(r), b(w)])
        }
        _ => return Err(bad()),
    })
}

/// The options into a placement, given the job's `rw` (and what followed its ':'),
/// fixed block sizes and `--size`.
pub(crate) fn resolve(
    w: &WhereArgs,
    rw: Rw,
    rw_mod: Option<&str>,
    bs: [u64; 2],
    size: Option<SizeArg>,
) -> anyhow::Result<Placed> {
    let mut p = Placement {
        randommap: !w.norandommap,
        size: size.and_then(SizeArg::bytes),
        size_pct: match size {
            Some(SizeArg::Pct(v)) => Some(v),
            _ => None,
        },
        ..Placement::default()
    };
    let mut notes = vec![];
    if let Some(m) = rw_mod {
        if rw.random() {
            p.seq_nr = m.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                usage!("--rw {}:{m}: after a random mode ':' takes how many I/Os share each random offset, like randread:8", rw.name())
            })?;
        } else {
            let (neg, v) = match m.strip_prefix('-') {
                Some(v) => (true, v),
                None => (false, m.strip_prefix('+').unwrap_or(m)),
            };
            let v = parse_size(v).map_err(|_| {
                usage!("--rw {}:{m}: after a sequential mode ':' takes the bytes to skip after each I/O, like read:8k (or read:-8k backwards)", rw.name())
            })? as i64;
            p.seq_add = if neg { -v } else { v };
        }
    }
    match w.rw_sequencer.as_deref() {
        None | Some("sequential") => {}
        Some("identical") => p.seq_identical = true,
        Some(o) => {
            return Err(usage!(
                "--rw_sequencer takes sequential or identical; got '{o}'"
            ))
        }
    }
    match w.random_generator.as_deref() {
        None | Some("tausworthe") | Some("tausworthe64") | Some("lfsr") => {}
        Some(o) => {
            return Err(usage!(
                "--random_generator takes tausworthe, tausworthe64 or lfsr; got '{o}'"
            ))
        }
    }
    let seed = match w.randrepeat.as_deref() {
        None | Some("1") | Some("true") => None,
        Some("0") | Some("false") => Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
        ),
        Some(o) => return Err(usage!("--randrepeat takes 0 or 1; got '{o}'")),
    };
    let mut bs = bs;
    if let (Some(_), Some(_)) = (&w.bssplit, &w.bsrange) {
        return Err(usage!(
            "--bssplit and --bsrange both choose block sizes; give one"
        ));
    }
    if let Some(s) = &w.bssplit {
        let v = parse_bssplit(s)?;
        for (d, l) in v.into_iter().enumerate() {
            p.bs[d] = BsChoice::Split(l);
        }
    }
    if let Some(s) = &w.bsrange {
        for (d, (min, max)) in parse_bsrange(s)?.into_iter().enumerate() {
            p.bs[d] = BsChoice::Range { min, max };
        }
    }
    for (b, choice) in bs.iter_mut().zip(&p.bs) {
        *b = choice.min_max(*b).1;
    }
    if let Some(s) = &w.blockalign {
        let [r, wr] = per_dir(s);
        p.blockalign = [
            Some(bytes("blockalign", r)?),
            Some(bytes("blockalign", wr)?),
        ];
        if p.blockalign.contains(&Some(0)) {
            return Err(usage!("--blockalign takes a size above 0; got '{s}'"));
        }
        // fio 3.33 (init.c): a random job whose blockalign is not its minimum block size
        // in some direction runs without the random map (the map is in units of that size).
        let min = |d: usize| p.bs[d].min_max(bs[d]).0;
        let off = p.blockalign[0] != Some(min(0)) || p.blockalign[1] != Some(min(1));
        if rw.random() && off && p.randommap {
            p.randommap = false;
            notes.push("fio: Any use of blockalign= turns off randommap (fio 3.33 does the same: random offsets may repeat before every block was touched)".into());
        }
    }
    p.bs_unaligned = w.bs_unaligned;
    if let Some(s) = &w.random_distribution {
        p.dist = parse_dist(s)?;
        if p.dist != Dist::Random {
            // fio: a non-uniform distribution turns the random map off.
            p.randommap = false;
        }
    }
    p.zone = zone(w)?;
    if let Some(s) = &w.offset {
        p.offset = amount("offset", s)?;
    }
    if let Some(s) = &w.offset_increment {
        p.offset_increment = amount("offset_increment", s)?;
    }
    if let Some(s) = &w.io_size {
        p.io_size = Some(bytes("io_size", s)?).filter(|v| *v > 0);
    }
    if w.number_ios == Some(0) {
        return Err(usage!("--number_ios takes 1 or more I/Os; got 0"));
    }
    p.number_ios = w.number_ios;
    p.loops = match w.loops {
        Some(0) => return Err(usage!("--loops takes 1 or more; got 0")),
        Some(n) => n,
        None => 1,
    };
    Ok(Placed {
        place: p,
        bs,
        seed,
        notes,
    })
}

fn zone(w: &WhereArgs) -> anyhow::Result<Option<Zone>> {
    let zs = w
        .zonesize
        .as_deref()
        .map(|s| bytes("zonesize", s))
        .transpose()?;
    match w.zonemode.as_deref() {
        Some("none") if zs.is_some() => {
            return Err(usage!("--zonemode none and --zonesize do not go together (fio refuses it too); use --zonemode strided"))
        }
        Some("none") => return Ok(None),
        None if zs.is_none() => return Ok(None),
        None | Some("strided") => {}
        Some("zbd") => {
            return Err(usage!("--zonemode zbd is for zoned block devices, which diskpulse probe does not run; use --zonemode strided or leave it out"))
        }
        Some(o) => return Err(usage!("--zonemode takes none or strided; got '{o}'")),
    }
    let size_b = zs.ok_or_else(|| {
        usage!("--zonemode strided needs --zonesize (bytes per zone), e.g. --zonesize 16k")
    })?;
    if size_b == 0 {
        return Err(usage!("--zonesize takes a size above 0"));
    }
    let range = match &w.zonerange {
        Some(s) => bytes("zonerange", s)?,
        None => size_b,
    };
    let skip = match &w.zoneskip {
        Some(s) => bytes("zoneskip", s)?,
        None => 0,
    };
    Ok(Some(Zone {
        size: size_b,
        range: range.max(1),
        skip,
    }))
}

/// The `:N` after `rw=` for `--show-job`.
pub(crate) fn rw_suffix(p: &Placement, rw: Rw) -> String {
    if rw.random() && p.seq_nr > 1 {
        format!(":{}", p.seq_nr)
    } else if !rw.random() && p.seq_add != 0 {
        let sign = if p.seq_add < 0 { "-" } else { "" };
        format!(":{sign}{}", sz(p.seq_add.unsigned_abs()))
    } else {
        String::new()
    }
}

/// The placement's options for `--show-job` (defaults left out).
pub(crate) fn render(p: &Placement) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let amt = |a: Amount| match a {
        Amount::Bytes(b) => sz(b),
        Amount::Pct(v) => format!("{v}%"),
    };
    if let Some(v) = p.size_pct {
        let _ = writeln!(o, "size={v}%");
    }
    if !p.randommap && p.dist == Dist::Random {
        let _ = writeln!(o, "norandommap");
    }
    if p.seq_identical {
        let _ = writeln!(o, "rw_sequencer=identical");
    }
    let list = |v: &Vec<(u64, f64)>| {
        v.iter()
            .map(|(b, p)| format!("{}/{p}", sz(*b)))
            .collect::<Vec<_>>()
            .join(":")
    };
    match (&p.bs[0], &p.bs[1]) {
        (BsChoice::Split(r), BsChoice::Split(w)) => {
            let _ = writeln!(o, "bssplit={},{}", list(r), list(w));
        }
        (BsChoice::Range { min: a, max: b }, BsChoice::Range { min: c, max: d }) => {
            let _ = writeln!(o, "bsrange={}-{},{}-{}", sz(*a), sz(*b), sz(*c), sz(*d));
        }
        _ => {}
    }
    if let [Some(r), Some(w)] = p.blockalign {
        let _ = writeln!(o, "blockalign={},{}", sz(r), sz(w));
    }
    if p.bs_unaligned {
        let _ = writeln!(o, "bs_unaligned");
    }
    let c = |c: &Option<f64>| c.map(|c| format!(":{c}")).unwrap_or_default();
    let zl = |v: &[(f64, f64)]| {
        v.iter()
            .map(|(a, b)| format!("{a}/{b}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let dist = match &p.dist {
        Dist::Random => None,
        Dist::Zipf { theta, center } => Some(format!("zipf:{theta}{}", c(center))),
        Dist::Pareto { h, center } => Some(format!("pareto:{h}{}", c(center))),
        Dist::Normal { dev_pct, center } => Some(format!("normal:{dev_pct}{}", c(center))),
        Dist::Zoned([r, w]) => Some(format!("zoned:{},{}", zl(r), zl(w))),
        Dist::ZonedAbs([r, w]) => {
            let f = |v: &Vec<(f64, u64)>| {
                v.iter()
                    .map(|(a, b)| format!("{a}/{}", sz(*b)))
                    .collect::<Vec<_>>()
                    .join(":")
            };
            Some(format!("zoned_abs:{},{}", f(r), f(w)))
        }
    };
    if let Some(d) = dist {
        let _ = writeln!(o, "random_distribution={d}");
    }
    if let Some(z) = p.zone {
        let _ = writeln!(
            o,
            "zonemode=strided\nzonesize={}\nzonerange={}\nzoneskip={}",
            sz(z.size),
            sz(z.range),
            sz(z.skip)
        );
    }
    if p.offset != Amount::Bytes(0) {
        let _ = writeln!(o, "offset={}", amt(p.offset));
    }
    if p.offset_increment != Amount::Bytes(0) {
        let _ = writeln!(o, "offset_increment={}", amt(p.offset_increment));
    }
    if let Some(v) = p.io_size {
        let _ = writeln!(o, "io_size={}", sz(v));
    }
    if let Some(v) = p.number_ios {
        let _ = writeln!(o, "number_ios={v}");
    }
    if p.loops > 1 {
        let _ = writeln!(o, "loops={}", p.loops);
    }
    o
}

#[cfg(test)]
#[path = "args_where_tests.rs"]
mod tests;
