/** Small DOM helpers: text only (never HTML from data), elements found by data attributes. */

export interface Texts {
  scopes: Record<string, string>;
  sensitivity: Record<string, string>;
  status: Record<string, string>;
  [key: string]: string | Record<string, string>;
}

export function loadTexts(): Texts {
  return JSON.parse(document.getElementById("device-i18n")?.textContent ?? "{}") as Texts;
}

export function text(texts: Texts, key: string, vars: Record<string, string | number> = {}): string {
  const value = texts[key];
  return (typeof value === "string" ? value : key).replace(/%\((\w+)\)s/g, (_m, name: string) => String(vars[name]));
}

export function one<T extends Element = HTMLElement>(root: ParentNode, selector: string): T {
  const found = root.querySelector<T>(selector);
  if (found === null) throw new Error(`the page lacks ${selector}`);
  return found;
}

export function setText(root: ParentNode, selector: string, value: string): void {
  root.querySelectorAll(selector).forEach((element) => {
    element.textContent = value;
  });
}

/** A clone of `<template data-…>`'s first element, its `[data-cell]` children by name. */
export function row(template: HTMLTemplateElement): { element: HTMLElement; cell: (name: string) => HTMLElement } {
  const element = template.content.firstElementChild?.cloneNode(true) as HTMLElement;
  return { element, cell: (name) => one(element, `[data-cell="${name}"]`) };
}

/** A moment in the page's language (the one the person chose on the site, `<html lang>`),
 * not the browser's: a page in Chinese says 下午, not PM. */
export function when(epochMs: number | string): string {
  const date = new Date(epochMs);
  if (Number.isNaN(date.getTime())) return "";
  const language = document.documentElement.lang;
  return date.toLocaleString(language && Intl.DateTimeFormat.supportedLocalesOf(language).length > 0 ? language : undefined);
}
