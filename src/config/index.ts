/** Configuration: every setting declared once, validated at start, documented from the declaration. */
export { ConfigError, loadConfig, type WharfConfig } from "./config.ts";
export { loadSettings, readSetting, SETTINGS, SettingsError, type SettingDeclaration, type SettingName, type SettingPart, type Settings } from "./settings.ts";
export { settingsHelp, settingsTable, withSettingsTable } from "./settings-docs.ts";
