//! Human descriptions of schedules: "At 07:05, Monday through Friday, UTC".

use crate::cron::{Cron, Schedule};

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 13] = [
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn bits(mask: u64, min: u32, max: u32) -> Vec<u32> {
    (min..=max).filter(|i| mask & (1 << i) != 0).collect()
}

fn full(mask: u64, min: u32, max: u32) -> bool {
    (min..=max).all(|i| mask & (1 << i) != 0)
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Runs of consecutive values: [1,2,3,5] -> "1 through 3 and 5".
fn runs(values: &[u32], name: impl Fn(u32) -> String) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            parts.push(format!("{} through {}", name(values[i]), name(values[j])));
        } else {
            parts.extend((i..=j).map(|k| name(values[k])));
        }
        i = j + 1;
    }
    and_list(&parts)
}

/// An arithmetic progression from the field's start covering the field: the step.
fn step_of(values: &[u32], min: u32, max: u32) -> Option<u32> {
    if values.len() < 2 || values[0] != min {
        return None;
    }
    let step = values[1] - values[0];
    let ok =
        values.windows(2).all(|w| w[1] - w[0] == step) && values[values.len() - 1] + step > max;
    ok.then_some(step)
}

fn time_part(c: &Cron) -> String {
    let (secs, mins, hours, ..) = c.fields();
    let secs = bits(secs, 0, 59);
    let mins_v = bits(mins, 0, 59);
    let hours_v = bits(u64::from(hours), 0, 23);
    let all_hours = hours_v.len() == 24;
    let sec_prefix = match secs.as_slice() {
        [0] => String::new(),
        _ if secs.len() == 60 => "Every second, ".to_string(),
        _ => match step_of(&secs, 0, 59) {
            Some(s) => format!("Every {s} seconds, "),
            None => format!("At second {}, ", runs(&secs, |v| v.to_string())),
        },
    };
    let minute_phrase = if mins_v.len() == 60 {
        "every minute".to_string()
    } else if let Some(s) = step_of(&mins_v, 0, 59) {
        format!("every {s} minutes")
    } else {
        format!(
            "at minute{} {}",
            if mins_v.len() == 1 { "" } else { "s" },
            runs(&mins_v, |v| v.to_string())
        )
    };
    let body = if all_hours {
        if mins_v.len() == 60 || step_of(&mins_v, 0, 59).is_some() {
            minute_phrase
        } else {
            format!("{minute_phrase} past every hour")
        }
    } else if mins_v.len() * hours_v.len() <= 4 {
        let times: Vec<String> = hours_v
            .iter()
            .flat_map(|h| mins_v.iter().map(move |m| format!("{h:02}:{m:02}")))
            .collect();
        format!("at {}", and_list(&times))
    } else if let Some(s) = step_of(&hours_v, 0, 23) {
        format!("{minute_phrase}, every {s} hours")
    } else {
        let hours_text = runs(&hours_v, |h| format!("{h:02}:00"));
        format!(
            "{minute_phrase}, in the hour{} from {hours_text}",
            if hours_v.len() == 1 { "" } else { "s" }
        )
    };
    let text = format!("{sec_prefix}{body}");
    let mut chars = text.chars();
    match chars.next() {
        Some(f) => f.to_uppercase().chain(chars).collect(),
        None => text,
    }
}

fn day_part(c: &Cron) -> Option<String> {
    let (_, _, _, dom, _, dow, days_and) = c.fields();
    let dom_all = full(u64::from(dom), 1, 31);
    let dow_all = full(u64::from(dow), 0, 6);
    let dom_text = || {
        let v = bits(u64::from(dom), 1, 31);
        format!(
            "on day{} {} of the month",
            if v.len() == 1 { "" } else { "s" },
            runs(&v, |d| d.to_string())
        )
    };
    let dow_text = || {
        runs(&bits(u64::from(dow), 0, 6), |d| {
            DAYS[d as usize].to_string()
        })
    };
    match (dom_all, dow_all, days_and) {
        (true, true, _) => None,
        (false, true, true) => Some(dom_text()),
        (true, false, true) => Some(dow_text()),
        (false, false, true) => Some(format!("{} if it is {}", dom_text(), dow_text())),
        (_, _, false) => Some(format!("{} or on {}", dom_text(), dow_text())),
    }
}

/// Describes a cron schedule (the zone's name last).
pub fn describe_cron(c: &Cron) -> String {
    let mut parts = vec![time_part(c)];
    parts.extend(day_part(c));
    let (.., months, _, _) = c.fields();
    let months_v = bits(u64::from(months), 1, 12);
    if months_v.len() < 12 {
        parts.push(format!(
            "in {}",
            runs(&months_v, |m| MONTHS[m as usize].to_string())
        ));
    }
    parts.push(c.zone().iana_name().unwrap_or("UTC").to_string());
    let text = parts.join(", ");
    if c.never_fires() {
        format!("Never ({text}: no such date)")
    } else {
        text
    }
}

/// Describes any schedule.
pub fn describe(s: &Schedule) -> String {
    match s {
        Schedule::Cron(c) => describe_cron(c),
        Schedule::Every(secs) => format!("Every {} after the previous tick", human_secs(*secs)),
    }
}

/// `5400` -> "1h30m", `90` -> "1m30s".
pub fn human_secs(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::ParseOptions;

    fn d(spec: &str, tz: Option<&str>) -> String {
        describe(
            &Schedule::parse(
                spec,
                ParseOptions {
                    timezone: tz,
                    identity: Some("job"),
                },
            )
            .unwrap(),
        )
    }

    #[test]
    fn descriptions() {
        assert_eq!(
            d("05 07 * * 1-5", None),
            "At 07:05, Monday through Friday, UTC"
        );
        assert_eq!(
            d("0 3 * * *", Some("Europe/Berlin")),
            "At 03:00, Europe/Berlin"
        );
        assert_eq!(d("*/15 * * * *", None), "Every 15 minutes, UTC");
        assert_eq!(d("* * * * *", None), "Every minute, UTC");
        assert_eq!(d("30 * * * *", None), "At minute 30 past every hour, UTC");
        assert_eq!(d("0 0,12 * * *", None), "At 00:00 and 12:00, UTC");
        assert_eq!(
            d("0 */6 * * *", None),
            "At 00:00, 06:00, 12:00 and 18:00, UTC"
        );
        assert_eq!(d("0 */2 * * *", None), "At minute 0, every 2 hours, UTC");
        assert_eq!(d("0 8 1 * *", None), "At 08:00, on day 1 of the month, UTC");
        assert_eq!(
            d("0 8 13 * 5", None),
            "At 08:00, on day 13 of the month or on Friday, UTC"
        );
        assert_eq!(
            d("0 0 1 1 *", None),
            "At 00:00, on day 1 of the month, in January, UTC"
        );
        assert_eq!(
            d("0 0 31 2 *", None),
            "Never (At 00:00, on day 31 of the month, in February, UTC: no such date)"
        );
        assert_eq!(
            d("*/10 * * * * *", None),
            "Every 10 seconds, every minute, UTC"
        );
        assert_eq!(
            d("@every 1h30m", None),
            "Every 1h30m after the previous tick"
        );
        assert_eq!(
            d("0 9-17 * * MON,WED,FRI", None),
            "At minute 0, in the hours from 09:00 through 17:00, Monday, Wednesday and Friday, UTC"
        );
    }
}
